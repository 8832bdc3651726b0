"""The citation guard: no proposal is applied without a verifiable citation.

A catalog strategy passes with a citation that has full metadata (authors, title, venue,
year, a link) and a *verified* claim for this very strategy; a search-found citation passes
with complete metadata, a record fetched for its DOI/arXiv id, and its own passage naming the
technique. Otherwise: UNSUPPORTED.
"""

from __future__ import annotations

import itertools
import re

from dftune.core.citation import CitedClaim
from dftune.core.domain.verdicts import GuardDecision
from dftune.tools.catalog import Catalog, default_catalog


def citation_guard(strategy_id: str, catalog: Catalog | None = None) -> GuardDecision:
    """Pass when a citation with full metadata verifiably supports this strategy."""
    cat = catalog or default_catalog()
    strategy = cat.strategies.get(strategy_id)
    if strategy is None:
        return GuardDecision(
            guard="citation",
            passed=False,
            verdict="unsupported",
            reason=f"{strategy_id}: not in the strategy catalog",
        )
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
                guard="citation",
                passed=True,
                reason=f"{strategy_id} is supported by {c.reference()} {c.link()}",
                details={"citation": cid, "claim": verified[0].claim, "url": c.link()},
            )
    why = "; ".join(problems) if problems else (strategy.unsupported_reason or "it cites nothing")
    return GuardDecision(
        guard="citation",
        passed=False,
        verdict="unsupported",
        reason=f"UNSUPPORTED: no verifiable citation for {strategy_id} ({why})",
    )


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
        return GuardDecision(
            guard="citation",
            passed=False,
            verdict="unsupported",
            reason=f"UNSUPPORTED: the citation {ref.id} lacks {', '.join(missing)}",
        )
    if not ref.verified_by:
        return GuardDecision(
            guard="citation",
            passed=False,
            verdict="unsupported",
            reason=f"UNSUPPORTED: the citation {ref.id} rests only on the paper's own sidecar/PDF "
            "metadata; a found citation needs a record fetched for its DOI or arXiv id",
        )
    if strategy_id is not None and not names_technique(strategy_id, ref.passage or ref.claim):
        return GuardDecision(
            guard="citation",
            passed=False,
            verdict="unsupported",
            reason=f"UNSUPPORTED: the passage of {ref.id} does not name the technique of {strategy_id}",
        )
    return GuardDecision(
        guard="citation",
        passed=True,
        reason=f"supported by {ref.reference()} {ref.url} "
        f"(found by {ref.source}, record from {ref.verified_by}; passage: {ref.claim[:200]!r})",
        details={
            "citation": ref.id,
            "claim": ref.claim,
            "url": ref.url,
            "source": ref.source,
            "verified_by": ref.verified_by,
        },
    )
