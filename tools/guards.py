"""Guard decisions: code, not prompts, stands in front of every knowledge-base record.

Four guards, as the seed and issue 5 specify; each returns a :class:`GuardDecision` with
a reason a person can check:

- citation: a proposal is applied only with a verifiable citation (authors, title,
  venue/year, URL) whose claim for this strategy was verified; otherwise UNSUPPORTED;
- non-degradation: a system-scoped result needs the paired application metric, and an
  application regression over 2% forces the verdict ``regression`` (the change is reverted);
- no-doing-less: the experiment's trace must do the same work as the baseline's (bytes,
  calls, files, epochs, steps, checkpoints; see resources/guards.toml);
- access-pattern: a strategy that changes the access pattern or transfer size is rejected.
"""

from __future__ import annotations

import functools
import itertools
import re
import tomllib
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dftune.core.citation import CitedClaim
from dftune.tools.catalog import Catalog, Strategy, default_catalog
from dftune.tools.runner.stats import pct_change, regression_guard
from dftune.tools.trace.model import Analysis

GuardName = Literal["citation", "non_degradation", "no_doing_less", "access_pattern"]
#: The seed's non-degradation threshold: an app metric more than 2% worse is a regression.
APP_REGRESSION_THRESHOLD = 0.02


class GuardDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    guard: GuardName
    passed: bool
    reason: str
    #: what the verdict becomes when the guard fails
    verdict: Literal["unsupported", "regression", "rejected"] | None = None
    #: the seed's flag for a non-degradation trip (treated exactly like a regression)
    guard_triggered: bool = False
    details: dict[str, Any] = Field(default_factory=dict)


def citation_guard(strategy_id: str, catalog: Catalog | None = None) -> GuardDecision:
    """Pass when a citation with full metadata verifiably supports this strategy."""
    cat = catalog or default_catalog()
    strategy = cat.strategies.get(strategy_id)
    if strategy is None:
        return GuardDecision(guard="citation", passed=False, verdict="unsupported",
                             reason=f"{strategy_id}: not in the strategy catalog")  # fmt: skip
    problems: list[str] = []
    for cid in strategy.citations:
        c = cat.citations.get(cid)
        if c is None:
            problems.append(f"{cid}: unknown citation")
            continue
        missing = c.missing
        verified = [cl for cl in c.claims if cl.strategy == strategy_id and cl.verified]
        if missing:
            problems.append(f"{cid}: missing {', '.join(missing)}")
        elif not verified:
            problems.append(f"{cid}: no verified claim that it supports {strategy_id}")
        else:
            return GuardDecision(
                guard="citation", passed=True,
                reason=f"{strategy_id} is supported by {c.reference()} {c.link()}",
                details={"citation": cid, "claim": verified[0].claim, "url": c.link()},
            )  # fmt: skip
    why = "; ".join(problems) if problems else (strategy.unsupported_reason or "it cites nothing")
    return GuardDecision(guard="citation", passed=False, verdict="unsupported",
                         reason=f"UNSUPPORTED: no verifiable citation for {strategy_id} ({why})")  # fmt: skip


def names_technique(strategy_id: str, text: str) -> bool:
    """A passage supports a strategy only if it names the technique: the strategy id's first word
    (``mmap`` for l1.mmap_random, ``odirect`` for l1.odirect) at the start of a word, punctuation
    ignored. A paper about the bottleneck in general is not evidence for one particular fix."""
    key = strategy_id.split(".", 1)[-1].split("_", 1)[0].lower()
    words = re.findall(r"[a-z0-9]+", text.lower())
    # a word (or two adjacent ones: O_DIRECT) that starts with the key: "mmap()", "mmapped", but
    # never the key inside another word ("omp" in "computes")
    return any(w.startswith(key) for w in (*words, *(a + b for a, b in itertools.pairwise(words))))


def reference_guard(ref: CitedClaim, strategy_id: str | None = None) -> GuardDecision:
    """A search-found citation passes with complete metadata (an http(s) link), a bibliographic record
    fetched for its DOI/arXiv id (``verified_by``: a paper's own sidecar or PDF metadata is never
    enough, anyone can write those) and a supporting passage that, for ``strategy_id``, names the
    technique."""
    missing = [*ref.citation.missing, *([] if ref.claim.strip() else ["supporting passage"])]
    if missing:
        return GuardDecision(guard="citation", passed=False, verdict="unsupported",
                             reason=f"UNSUPPORTED: the citation {ref.id} lacks {', '.join(missing)}")  # fmt: skip
    if not ref.verified_by:
        return GuardDecision(guard="citation", passed=False, verdict="unsupported",
                             reason=f"UNSUPPORTED: the citation {ref.id} rests only on the paper's own sidecar/PDF "
                                    "metadata; a found citation needs a record fetched for its DOI or arXiv id")  # fmt: skip
    if strategy_id is not None and not names_technique(strategy_id, ref.passage or ref.claim):
        return GuardDecision(guard="citation", passed=False, verdict="unsupported",
                             reason=f"UNSUPPORTED: the passage of {ref.id} does not name the technique of {strategy_id}")  # fmt: skip
    return GuardDecision(guard="citation", passed=True, reason=f"supported by {ref.reference()} {ref.url} "
                         f"(found by {ref.source}, record from {ref.verified_by}; passage: {ref.claim[:200]!r})",
                         details={"citation": ref.id, "claim": ref.claim, "url": ref.url, "source": ref.source,
                                  "verified_by": ref.verified_by})  # fmt: skip


def non_degradation_guard(
    *,
    metric_scope: Literal["app", "system"],
    app_before: float | None,
    app_after: float | None,
    lower_is_better: bool = True,
) -> GuardDecision:
    """A system-level win that costs the application more than 2% is a regression."""
    if metric_scope == "app":
        return GuardDecision(guard="non_degradation", passed=True,
                             reason="app-scoped result: the application metric itself was compared")  # fmt: skip
    if app_before is None or app_after is None:
        return GuardDecision(guard="non_degradation", passed=False, verdict="rejected",
                             reason="a system-scoped result needs the paired app metric (app_before and app_after) "
                                    "for the same change")  # fmt: skip
    gain = pct_change(app_before, app_after, lower_is_better=lower_is_better) or 0.0
    details = {"app_before": app_before, "app_after": app_after, "app_change_pct": round(gain, 4)}
    if regression_guard(
        app_before, app_after, lower_is_better=lower_is_better, threshold=APP_REGRESSION_THRESHOLD
    ):
        return GuardDecision(
            guard="non_degradation", passed=False, verdict="regression", guard_triggered=True, details=details,
            reason=f"the application got {-gain:.2f}% worse ({app_before:g} -> {app_after:g}), over the 2% "
                   "limit: a system optimization that degrades the app is never a win; revert it",
        )  # fmt: skip
    if gain >= 0:
        said = f"the application metric improved by {gain:.2f}% ({app_before:g} -> {app_after:g})"
    else:
        said = (
            f"the application got {-gain:.2f}% worse ({app_before:g} -> {app_after:g}), within the 2% limit"
        )
    return GuardDecision(guard="non_degradation", passed=True, details=details, reason=said)


@functools.cache
def _guard_rules() -> dict[str, Any]:
    text = (resources.files("dftune.resources") / "guards.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def work_done(a: Analysis) -> dict[str, float]:
    """What the application did, as the no-doing-less guard counts it."""
    return {
        "read_bytes": float(a.read.bytes or 0), "write_bytes": float(a.write.bytes or 0),
        "read_count": float(a.read.count), "write_count": float(a.write.count),
        "metadata_count": float(a.metadata.count), "files_accessed": float(a.files_accessed),
        "epochs": float(len(a.epochs)), "steps": float(a.steps), "checkpoints": float(a.checkpoint_events),
    }  # fmt: skip


def doing_less_by_definition(strategy: Strategy) -> GuardDecision | None:
    """A strategy the catalog marks as doing less is rejected before anything is measured."""
    if strategy.forbidden_kind != "doing_less":
        return None
    return GuardDecision(guard="no_doing_less", passed=False, verdict="rejected",
                         reason=f"{strategy.id} is doing less by definition: {strategy.forbidden_reason}")  # fmt: skip


def no_doing_less_guard(
    baseline: Analysis,
    experiment: Analysis,
    *,
    strategy: Strategy | None = None,
    tolerance: float | None = None,
) -> GuardDecision:
    """Reject a change whose trace shows less work than the baseline's, with the numbers."""
    rules = _guard_rules()
    tol = rules["tolerance"] if tolerance is None else tolerance
    if strategy is not None and (by_definition := doing_less_by_definition(strategy)) is not None:
        return by_definition
    allowed = set(rules["may_reduce"].get(str(strategy.checklist), [])) if strategy else set()
    before, after = work_done(baseline), work_done(experiment)
    drops: list[str] = []
    allowed_drops: list[str] = []
    for key, b in before.items():
        a = after[key]
        if b > 0 and a < b * (1 - tol):
            line = f"{key.replace('_', ' ')} {b:,.0f} -> {a:,.0f} ({100 * (a - b) / b:+.1f}%)"
            (allowed_drops if key in allowed else drops).append(line)
    details = {"baseline": before, "experiment": after, "tolerance": tol, "allowed_to_drop": sorted(allowed)}
    if drops:
        return GuardDecision(guard="no_doing_less", passed=False, verdict="rejected", details=details,
                             reason="doing less, not going faster: " + "; ".join(drops))  # fmt: skip
    note = f" (expected for this strategy: {'; '.join(allowed_drops)})" if allowed_drops else ""
    return GuardDecision(guard="no_doing_less", passed=True, details=details,
                         reason=f"the same work was done (within {tol:.0%}){note}")  # fmt: skip


def access_pattern_guard(strategy: Strategy) -> GuardDecision:
    """The seed's Rule 5: changing what the application does is not an optimization."""
    if strategy.forbidden_kind == "access_pattern":
        return GuardDecision(guard="access_pattern", passed=False, verdict="rejected",
                             reason=f"{strategy.id} changes the access pattern or transfer size: "
                                    f"{strategy.forbidden_reason}")  # fmt: skip
    return GuardDecision(guard="access_pattern", passed=True,
                         reason=f"{strategy.id} keeps the application's access pattern and transfer size")  # fmt: skip
