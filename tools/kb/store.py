"""The optimization knowledge base: every measured result of an applied strategy, in SQLite.

The seed's ``opt_kb_record`` / ``opt_kb_lookup`` (issue 5, "Knowledge base"). The database
lives at ``$DFTUNE_HOME/kb/opt_kb.sqlite`` (every function takes ``db=`` to point elsewhere).

Rules:

- ``opt_kb_record`` runs the four guards of :mod:`dftune.tools.guards` itself, so no caller
  can bypass them: citation (fails -> ``unsupported``, the change must not be applied),
  access pattern (fails -> ``rejected``), no-doing-less (needs the baseline's and the
  experiment's trace analyses; fails -> ``rejected``; without them the guard is recorded as
  NOT RUN and listed in ``unchecked_guards``, never silently passed), non-degradation (a
  ``metric_scope="system"`` result without the paired app metric is a ``ValueError``; an app
  metric more than 2% worse forces ``regression`` with ``guard_triggered``).
- When every guard lets the result through, the numbers decide: ``win`` needs an improvement
  of at least 5% AND evidence that it is beyond the noise (the runner's statistical
  comparison said ``win``, or, without a comparison, the two arms' 95% confidence intervals
  do not overlap); a smaller or unproven improvement is ``no_change``; worse beyond the noise
  is ``regression`` (without any statistical evidence: worse by more than 2%).
- No-ops, regressions, rejected and unsupported changes are recorded too. Records are
  immutable (insert only; SQLite triggers refuse UPDATE and DELETE) and carry every guard
  decision with its reason.
- Scope follows the strategy's layer and decides who inherits a finding: L3 -> ``system``
  (stays on its machine), L2 -> ``software`` (travels across systems and workloads),
  L1 -> ``workload`` (stays with its application).
- Recording the same input twice within a run (``run_id`` set), e.g. after a crash and
  ``dftune resume``, returns the first record instead of adding a duplicate.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dftune.core.citation import CitedClaim
from dftune.core.errors import DftuneError
from dftune.core.home import dftune_home
from dftune.core.vocabulary import FsType, Layer
from dftune.tools.catalog import Catalog, Strategy, default_catalog
from dftune.tools.catalog.models import STRATEGY_ID
from dftune.tools.guards import (
    APP_REGRESSION_THRESHOLD,
    GuardDecision,
    GuardName,
    access_pattern_guard,
    citation_guard,
    doing_less_by_definition,
    no_doing_less_guard,
    non_degradation_guard,
    reference_guard,
    work_done,
)
from dftune.tools.runner.stats import Comparison, relative_improvement
from dftune.tools.runner.stats import Verdict as StatsVerdict
from dftune.tools.trace.model import Analysis

__all__ = [
    "SCHEMA_VERSION",
    "SCOPE_OF_LAYER",
    "WIN_THRESHOLD_PCT",
    "ComparisonSummary",
    "KbError",
    "KbLookup",
    "KbRecord",
    "KbRecordIn",
    "KbVerdict",
    "Scope",
    "default_db_path",
    "opt_kb_get",
    "opt_kb_lookup",
    "opt_kb_record",
    "opt_kb_records",
]

KbVerdict = Literal["win", "no_change", "regression", "unsupported", "rejected"]
Scope = Literal["system", "software", "workload"]
MetricScope = Literal["app", "system"]

#: Issue 5: a KB ``win`` is an improvement of at least 5% (and beyond the noise).
WIN_THRESHOLD_PCT = 5.0
#: Who inherits a finding, by the strategy's layer (the seed's "Scope decides transferability").
SCOPE_OF_LAYER: dict[str, Scope] = {"L3": "system", "L2": "software", "L1": "workload"}
SCHEMA_VERSION = 1
_EPS = 1e-9


class KbError(DftuneError):
    """The knowledge-base file cannot be used (e.g. it was written by a newer dftune)."""


def default_db_path() -> Path:
    """``$DFTUNE_HOME/kb/opt_kb.sqlite``."""
    return dftune_home() / "kb" / "opt_kb.sqlite"


# --------------------------------------------------------------------------- models


class ComparisonSummary(BaseModel):
    """The part of a :class:`~dftune.tools.runner.stats.Comparison` the KB needs, when the
    caller does not have the full dump."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict: StatsVerdict
    #: bootstrap CI of the ratio candidate/baseline
    ci95: tuple[float, float] | None = None
    p_value: float | None = Field(default=None, ge=0.0, le=1.0)
    reason: str | None = None
    lower_is_better: bool | None = None


def _finite(name: str, value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")


def _interval(name: str, ci: tuple[float, float] | None) -> None:
    if ci is None:
        return
    lo, hi = ci
    _finite(f"{name}[0]", lo)
    _finite(f"{name}[1]", hi)
    if lo > hi:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {ci}")


def _layer_of(strategy_id: str) -> Layer:
    prefix = strategy_id.split(".", 1)[0].upper()
    if prefix == "L1":
        return "L1"
    if prefix == "L2":
        return "L2"
    return "L3"


class KbRecordIn(BaseModel):
    """One measured (or refused) change, as the verifier hands it to ``opt_kb_record``."""

    model_config = ConfigDict(extra="forbid")

    run_id: str | None = None
    #: the opt<n> iteration the change was applied in
    iteration: int | None = Field(default=None, ge=0)
    #: hostname or cluster name (L3 findings stay on it)
    system: str = Field(min_length=1)
    workload: str = Field(min_length=1)
    #: the software stack, as a comma list ("hdf5,mpi-io,lustre") or a list; stored lower-case, sorted
    software: list[str] = Field(default_factory=list)
    strategy: str = Field(pattern=STRATEGY_ID)
    #: what was applied: knob settings, environment, patch id (any JSON object)
    change: dict[str, Any] = Field(default_factory=dict)
    metric: str = Field(min_length=1)
    metric_scope: MetricScope = "app"
    lower_is_better: bool = True
    #: medians of the baseline and the experiment arm (taken from ``comparison`` when omitted)
    before: float | None = None
    after: float | None = None
    #: 95% confidence intervals of those medians (e.g. BenchResult.ci95)
    before_ci: tuple[float, float] | None = None
    after_ci: tuple[float, float] | None = None
    #: the runner's statistical comparison (stats.Comparison or its dump, or a summary)
    comparison: Comparison | ComparisonSummary | None = None
    #: the paired application metric; required for metric_scope="system"
    app_metric: str | None = None
    app_before: float | None = None
    app_after: float | None = None
    app_lower_is_better: bool = True
    caveats: str = ""
    fs_type: FsType | None = None
    #: a citation the literature search found outside the catalog (complete, with its passage)
    found_citation: CitedClaim | None = None

    @field_validator("software", mode="before")
    @classmethod
    def _software_list(cls, value: Any) -> Any:
        if value is None:
            return []
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            return value
        if not all(isinstance(s, str) for s in items):
            raise ValueError("software items must be strings")
        return sorted({s.strip().lower() for s in items if s.strip()})

    @field_validator("change")
    @classmethod
    def _json_change(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            json.dumps(value, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"change must be plain JSON (knob settings, env, patch id): {exc}") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KbRecordIn:
        if isinstance(self.comparison, Comparison):
            cmp = self.comparison
            if cmp.lower_is_better != self.lower_is_better:
                raise ValueError(
                    f"comparison.lower_is_better={cmp.lower_is_better} contradicts lower_is_better={self.lower_is_better}"
                )
            for name, given, median in (("before", self.before, cmp.baseline.median),
                                        ("after", self.after, cmp.candidate.median)):  # fmt: skip
                if given is None:
                    setattr(self, name, median)
                elif not math.isclose(given, median, rel_tol=1e-6, abs_tol=1e-12):
                    arm = "baseline" if name == "before" else "candidate"
                    raise ValueError(f"{name}={given:g} is not the comparison's {arm} median {median:g}")
        elif isinstance(self.comparison, ComparisonSummary):
            lib = self.comparison.lower_is_better
            if lib is not None and lib != self.lower_is_better:
                raise ValueError(
                    f"comparison.lower_is_better={lib} contradicts lower_is_better={self.lower_is_better}"
                )
        for name in ("before", "after", "app_before", "app_after"):
            _finite(name, getattr(self, name))
        _interval("before_ci", self.before_ci)
        _interval("after_ci", self.after_ci)
        if self.comparison is not None and self.comparison.ci95 is not None:
            _interval("comparison.ci95", self.comparison.ci95)
        if (self.before is None) != (self.after is None):
            raise ValueError("give both before and after (the two medians), or neither")
        if self.before == 0:
            raise ValueError("before is 0: a relative change is undefined")
        if self.app_before == 0:
            raise ValueError("app_before is 0: a relative change is undefined")
        if self.metric_scope == "system":
            missing = [n for n in ("app_metric", "app_before", "app_after") if getattr(self, n) is None]
            if missing:
                raise ValueError(
                    f"metric_scope='system' needs the paired app metric for the same change "
                    f"(missing: {', '.join(missing)}): a system-level result is only kept when the "
                    "application did not pay for it (the seed's non-degradation guard)"
                )
        if self.comparison is not None and self.before is not None and self.after is not None:
            pct = _change_pct(self.before, self.after, self.lower_is_better)
            v = self.comparison.verdict
            if (v == "win" and pct <= 0) or (v == "regression" and pct >= 0):
                raise ValueError(
                    f"the comparison says {v} but the medians {self.before:g} -> {self.after:g} "
                    f"change by {pct:+.2f}% (positive = better)"
                )
        if _layer_of(self.strategy) == "L2" and not self.software:
            raise ValueError(
                "an L2 (software-scoped) finding needs the software it concerns, e.g. "
                "software='hdf5,mpi-io': software findings travel to every system and workload using it"
            )
        return self


class KbRecord(BaseModel):
    """One immutable knowledge-base record, as stored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int
    #: UTC, ISO 8601
    created: str
    run_id: str | None
    iteration: int | None
    system: str
    workload: str
    software: list[str]
    scope: Scope
    layer: Layer
    strategy: str
    strategy_name: str | None
    change: dict[str, Any]
    metric: str
    metric_scope: MetricScope
    lower_is_better: bool
    before: float | None
    before_ci: tuple[float, float] | None
    after: float | None
    after_ci: tuple[float, float] | None
    #: signed relative change of the medians in percent; positive = better
    change_pct: float | None
    #: the comparison's bootstrap CI of the ratio after/before
    ratio_ci95: tuple[float, float] | None
    p_value: float | None
    comparison_verdict: StatsVerdict | None
    comparison_reason: str | None
    #: the full comparison as given (stats.Comparison dump or summary)
    comparison: dict[str, Any] | None
    app_metric: str | None
    app_before: float | None
    app_after: float | None
    app_lower_is_better: bool
    #: signed relative change of the app metric in percent; positive = better
    app_change_pct: float | None
    verdict: KbVerdict
    verdict_reason: str
    #: the seed's flag: the non-degradation guard tripped (treat exactly like a regression: revert)
    guard_triggered: bool
    #: every guard decision, in the order citation, access_pattern, no_doing_less, non_degradation
    guards: list[GuardDecision]
    #: guards that could not run (e.g. no trace analyses for no_doing_less)
    unchecked_guards: list[str]
    citation_id: str | None
    #: the full reference: authors, title, venue, year
    citation: str | None
    citation_url: str | None
    caveats: str
    fs_type: str | None
    #: identifies the input within a run (resume never duplicates a record); None without run_id
    dedup_key: str | None


class KbLookup(BaseModel):
    """The seed's ``opt_kb_lookup`` answer: measured findings partitioned by scope, newest first."""

    model_config = ConfigDict(extra="forbid")

    system: str | None
    workload: str | None
    software: list[str]
    strategy: str | None
    #: L3 findings recorded on this very system
    system_findings: list[KbRecord]
    #: L2 findings for any of the given software (all of them when no software was given)
    software_findings: list[KbRecord]
    #: L1 findings recorded for this very workload
    workload_findings: list[KbRecord]


# --------------------------------------------------------------------------- schema

_SCHEMA_V1 = (
    """
    CREATE TABLE records (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        dedup_key TEXT UNIQUE,
        created TEXT NOT NULL,
        run_id TEXT,
        iteration INTEGER,
        system TEXT NOT NULL,
        workload TEXT NOT NULL,
        software TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('system', 'software', 'workload')),
        layer TEXT NOT NULL CHECK (layer IN ('L1', 'L2', 'L3')),
        strategy TEXT NOT NULL,
        strategy_name TEXT,
        change TEXT NOT NULL,
        metric TEXT NOT NULL,
        metric_scope TEXT NOT NULL CHECK (metric_scope IN ('app', 'system')),
        lower_is_better INTEGER NOT NULL,
        before_median REAL,
        before_ci_lo REAL,
        before_ci_hi REAL,
        after_median REAL,
        after_ci_lo REAL,
        after_ci_hi REAL,
        change_pct REAL,
        ratio_ci_lo REAL,
        ratio_ci_hi REAL,
        p_value REAL,
        comparison_verdict TEXT,
        comparison_reason TEXT,
        comparison TEXT,
        app_metric TEXT,
        app_before REAL,
        app_after REAL,
        app_lower_is_better INTEGER NOT NULL,
        app_change_pct REAL,
        verdict TEXT NOT NULL
            CHECK (verdict IN ('win', 'no_change', 'regression', 'unsupported', 'rejected')),
        verdict_reason TEXT NOT NULL,
        guard_triggered INTEGER NOT NULL,
        guards TEXT NOT NULL,
        unchecked_guards TEXT NOT NULL,
        citation_id TEXT,
        citation TEXT,
        citation_url TEXT,
        caveats TEXT NOT NULL,
        fs_type TEXT
    )
    """,
    "CREATE INDEX records_scope ON records (scope, system, workload)",
    "CREATE INDEX records_strategy ON records (strategy)",
    "CREATE INDEX records_run ON records (run_id, iteration)",
    """
    CREATE TRIGGER records_no_update BEFORE UPDATE ON records
    BEGIN SELECT RAISE(ABORT, 'knowledge-base records are immutable (insert only)'); END
    """,
    """
    CREATE TRIGGER records_no_delete BEFORE DELETE ON records
    BEGIN SELECT RAISE(ABORT, 'knowledge-base records are immutable (insert only)'); END
    """,
)


def _create_v1(conn: sqlite3.Connection) -> None:
    for stmt in _SCHEMA_V1:
        conn.execute(stmt)


#: The migration hook: ``MIGRATIONS[n]`` upgrades a database at version ``n`` to ``n + 1``.
#: Version 0 is an empty file. Add an entry (and bump SCHEMA_VERSION) for every schema change;
#: all steps run in one transaction, so a failed upgrade leaves the file untouched.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {0: _create_v1}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _ensure_schema(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied TEXT NOT NULL)"
    )
    if (conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0) == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")  # another process may be migrating: look again under the lock
    try:
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0
        if version > SCHEMA_VERSION:
            raise KbError(
                f"the knowledge base is at schema version {version}, newer than this dftune "
                f"understands ({SCHEMA_VERSION}); upgrade dftune"
            )
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](conn)
            version += 1
            conn.execute("INSERT INTO schema_version (version, applied) VALUES (?, ?)", (version, _now()))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


@contextmanager
def _connect(db: Path | str | None) -> Iterator[sqlite3.Connection]:
    path = Path(db) if db is not None else default_db_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        _ensure_schema(conn)
        yield conn
    finally:
        conn.close()


# --------------------------------------------------------------------------- guards and verdict


def _change_pct(before: float, after: float, lower_is_better: bool) -> float:
    """Signed relative change in percent; positive = better for the metric's direction."""
    return 100.0 * relative_improvement(before, after, lower_is_better=lower_is_better)


def _not_run(guard: GuardName, reason: str, **details: Any) -> GuardDecision:
    """A guard that could not run: recorded as such (passed=False, no verdict), never as a pass."""
    return GuardDecision(guard=guard, passed=False, verdict=None, reason=f"NOT RUN: {reason}",
                         details={"ran": False, **details})  # fmt: skip


def _doing_less_decision(
    strategy: Strategy | None, baseline: Analysis | None, experiment: Analysis | None
) -> GuardDecision:
    if baseline is not None and experiment is not None:
        return no_doing_less_guard(baseline, experiment, strategy=strategy)
    if strategy is not None and (by_definition := doing_less_by_definition(strategy)) is not None:
        return by_definition
    missing = [
        n for n, a in (("baseline_analysis", baseline), ("experiment_analysis", experiment)) if a is None
    ]
    return _not_run(
        "no_doing_less",
        f"{' and '.join(missing)} not given, so the work done (bytes and calls per family, files, "
        "epochs, steps, checkpoints) was NOT compared with the baseline's; a speed-up here may be "
        "doing less",
        missing=missing,
    )


def _numeric_verdict(rec: KbRecordIn, change_pct: float | None) -> tuple[KbVerdict, str]:
    """Verdict of a result every guard let through, from the numbers."""
    if change_pct is None or rec.before is None or rec.after is None:
        raise ValueError(
            "a result that passed the guards needs its measurement: before and after "
            "(the two medians) or the runner's comparison"
        )
    moved = f"{rec.metric} {rec.before:g} -> {rec.after:g} ({change_pct:+.2f}%, positive = better)"
    win_text = f"{WIN_THRESHOLD_PCT:g}%"
    cmp = rec.comparison
    if cmp is not None:
        said = f"the statistical comparison says {cmp.verdict}" + (f" ({cmp.reason})" if cmp.reason else "")
        if cmp.verdict == "regression":
            return "regression", f"worse beyond the noise: {moved}; {said}"
        if cmp.verdict == "no_change":
            return "no_change", f"within the noise: {moved}; {said}"
        if change_pct >= WIN_THRESHOLD_PCT - _EPS:
            return "win", f"improved by at least {win_text} and beyond the noise: {moved}; {said}"
        return (
            "no_change",
            f"a significant but small improvement: {moved} is below the {win_text} a KB win needs",
        )
    if rec.before_ci is not None and rec.after_ci is not None:
        (blo, bhi), (alo, ahi) = rec.before_ci, rec.after_ci
        disjoint = bhi < alo or ahi < blo
        cis = f"95% CIs before [{blo:g}, {bhi:g}], after [{alo:g}, {ahi:g}]"
        if not disjoint or change_pct == 0:
            return "no_change", f"within the noise: {moved}; the {cis} overlap"
        if change_pct < 0:
            return "regression", f"worse beyond the noise: {moved}; the {cis} do not overlap"
        if change_pct >= WIN_THRESHOLD_PCT - _EPS:
            return (
                "win",
                f"improved by at least {win_text} and beyond the noise: {moved}; the {cis} do not overlap",
            )
        return "no_change", f"a small improvement: {moved} is below the {win_text} a KB win needs"
    limit = 100 * APP_REGRESSION_THRESHOLD
    if change_pct < -limit - _EPS:
        return "regression", (
            f"worse by more than {limit:g}%: {moved} (no statistical comparison or confidence "
            "intervals were given; a loss this size is treated as a regression)"
        )
    return "no_change", (
        f"{moved}; no statistical comparison or confidence intervals were given, so nothing can be "
        "credited as a win (pass the runner's comparison)"
    )


def _dedup_key(rec: KbRecordIn, baseline: Analysis | None, experiment: Analysis | None) -> str | None:
    if rec.run_id is None:
        return None
    doc = {
        "input": rec.model_dump(mode="json"),
        "baseline": work_done(baseline) if baseline is not None else None,
        "experiment": work_done(experiment) if experiment is not None else None,
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _build(
    rec: KbRecordIn,
    catalog: Catalog,
    baseline: Analysis | None,
    experiment: Analysis | None,
) -> dict[str, Any]:
    """Run the guards and decide the verdict; returns the record's fields (without id/created)."""
    strategy = catalog.strategies.get(rec.strategy)
    cit = citation_guard(rec.strategy, catalog)
    if not cit.passed and rec.found_citation is not None:
        cit = reference_guard(rec.found_citation)
    if strategy is None:
        access = _not_run("access_pattern", f"{rec.strategy} is not in the strategy catalog")
    else:
        access = access_pattern_guard(strategy)
    doing_less = _doing_less_decision(strategy, baseline, experiment)
    non_degradation = non_degradation_guard(
        metric_scope=rec.metric_scope,
        app_before=rec.app_before,
        app_after=rec.app_after,
        lower_is_better=rec.app_lower_is_better,
    )
    if rec.metric_scope == "system" and not non_degradation.passed and not non_degradation.guard_triggered:
        # unreachable through KbRecordIn's validation; kept so the rule holds on its own
        raise ValueError(non_degradation.reason)
    decisions = [cit, access, doing_less, non_degradation]

    change_pct = (
        _change_pct(rec.before, rec.after, rec.lower_is_better)
        if rec.before is not None and rec.after is not None
        else None
    )
    rejecting = [d for d in (access, doing_less) if not d.passed and d.verdict == "rejected"]
    verdict: KbVerdict
    if rejecting:  # forbidden whatever its citations: rejection is the stronger, more useful reason
        verdict, reason = "rejected", "; ".join(f"{d.guard}: {d.reason}" for d in rejecting)
    elif not cit.passed:
        verdict, reason = "unsupported", f"{cit.reason}; the change must not be applied"
    elif non_degradation.guard_triggered:
        verdict, reason = "regression", f"non_degradation guard triggered: {non_degradation.reason}"
    else:
        verdict, reason = _numeric_verdict(rec, change_pct)

    citation_id = cit.details.get("citation") if cit.passed else None
    c = catalog.citations.get(citation_id) if citation_id else None
    found = rec.found_citation if cit.passed and c is None else None
    cmp = rec.comparison
    layer: Layer = strategy.layer if strategy is not None else _layer_of(rec.strategy)
    app_change = (
        _change_pct(rec.app_before, rec.app_after, rec.app_lower_is_better)
        if rec.app_before is not None and rec.app_after is not None
        else None
    )
    return {
        "run_id": rec.run_id,
        "iteration": rec.iteration,
        "system": rec.system,
        "workload": rec.workload,
        "software": rec.software,
        "scope": SCOPE_OF_LAYER[layer],
        "layer": layer,
        "strategy": rec.strategy,
        "strategy_name": strategy.name if strategy is not None else None,
        "change": rec.change,
        "metric": rec.metric,
        "metric_scope": rec.metric_scope,
        "lower_is_better": rec.lower_is_better,
        "before": rec.before,
        "before_ci": rec.before_ci,
        "after": rec.after,
        "after_ci": rec.after_ci,
        "change_pct": change_pct,
        "ratio_ci95": cmp.ci95 if cmp is not None else None,
        "p_value": cmp.p_value if cmp is not None else None,
        "comparison_verdict": cmp.verdict if cmp is not None else None,
        "comparison_reason": cmp.reason if cmp is not None else None,
        "comparison": cmp.model_dump(mode="json") if cmp is not None else None,
        "app_metric": rec.app_metric,
        "app_before": rec.app_before,
        "app_after": rec.app_after,
        "app_lower_is_better": rec.app_lower_is_better,
        "app_change_pct": app_change,
        "verdict": verdict,
        "verdict_reason": reason,
        "guard_triggered": any(d.guard_triggered for d in decisions),
        "guards": decisions,
        "unchecked_guards": [d.guard for d in decisions if d.details.get("ran") is False],
        "citation_id": citation_id,
        "citation": c.reference() if c is not None else found.reference() if found is not None else None,
        "citation_url": c.link() if c is not None else found.url if found is not None else None,
        "caveats": rec.caveats,
        "fs_type": rec.fs_type,
        "dedup_key": _dedup_key(rec, baseline, experiment),
    }


# --------------------------------------------------------------------------- rows


def _split(ci: tuple[float, float] | None) -> tuple[float | None, float | None]:
    return (ci[0], ci[1]) if ci is not None else (None, None)


def _to_row(f: dict[str, Any]) -> dict[str, Any]:
    before_lo, before_hi = _split(f["before_ci"])
    after_lo, after_hi = _split(f["after_ci"])
    ratio_lo, ratio_hi = _split(f["ratio_ci95"])
    return {
        "dedup_key": f["dedup_key"],
        "created": f["created"],
        "run_id": f["run_id"],
        "iteration": f["iteration"],
        "system": f["system"],
        "workload": f["workload"],
        "software": ",".join(f["software"]),
        "scope": f["scope"],
        "layer": f["layer"],
        "strategy": f["strategy"],
        "strategy_name": f["strategy_name"],
        "change": json.dumps(f["change"], sort_keys=True),
        "metric": f["metric"],
        "metric_scope": f["metric_scope"],
        "lower_is_better": int(f["lower_is_better"]),
        "before_median": f["before"],
        "before_ci_lo": before_lo,
        "before_ci_hi": before_hi,
        "after_median": f["after"],
        "after_ci_lo": after_lo,
        "after_ci_hi": after_hi,
        "change_pct": f["change_pct"],
        "ratio_ci_lo": ratio_lo,
        "ratio_ci_hi": ratio_hi,
        "p_value": f["p_value"],
        "comparison_verdict": f["comparison_verdict"],
        "comparison_reason": f["comparison_reason"],
        "comparison": json.dumps(f["comparison"], sort_keys=True) if f["comparison"] is not None else None,
        "app_metric": f["app_metric"],
        "app_before": f["app_before"],
        "app_after": f["app_after"],
        "app_lower_is_better": int(f["app_lower_is_better"]),
        "app_change_pct": f["app_change_pct"],
        "verdict": f["verdict"],
        "verdict_reason": f["verdict_reason"],
        "guard_triggered": int(f["guard_triggered"]),
        "guards": json.dumps([d.model_dump(mode="json") for d in f["guards"]], sort_keys=True),
        "unchecked_guards": json.dumps(f["unchecked_guards"]),
        "citation_id": f["citation_id"],
        "citation": f["citation"],
        "citation_url": f["citation_url"],
        "caveats": f["caveats"],
        "fs_type": f["fs_type"],
    }


def _pair(lo: float | None, hi: float | None) -> tuple[float, float] | None:
    return (lo, hi) if lo is not None and hi is not None else None


def _from_row(row: sqlite3.Row) -> KbRecord:
    return KbRecord(
        id=row["id"],
        created=row["created"],
        run_id=row["run_id"],
        iteration=row["iteration"],
        system=row["system"],
        workload=row["workload"],
        software=[s for s in row["software"].split(",") if s],
        scope=row["scope"],
        layer=row["layer"],
        strategy=row["strategy"],
        strategy_name=row["strategy_name"],
        change=json.loads(row["change"]),
        metric=row["metric"],
        metric_scope=row["metric_scope"],
        lower_is_better=bool(row["lower_is_better"]),
        before=row["before_median"],
        before_ci=_pair(row["before_ci_lo"], row["before_ci_hi"]),
        after=row["after_median"],
        after_ci=_pair(row["after_ci_lo"], row["after_ci_hi"]),
        change_pct=row["change_pct"],
        ratio_ci95=_pair(row["ratio_ci_lo"], row["ratio_ci_hi"]),
        p_value=row["p_value"],
        comparison_verdict=row["comparison_verdict"],
        comparison_reason=row["comparison_reason"],
        comparison=json.loads(row["comparison"]) if row["comparison"] is not None else None,
        app_metric=row["app_metric"],
        app_before=row["app_before"],
        app_after=row["app_after"],
        app_lower_is_better=bool(row["app_lower_is_better"]),
        app_change_pct=row["app_change_pct"],
        verdict=row["verdict"],
        verdict_reason=row["verdict_reason"],
        guard_triggered=bool(row["guard_triggered"]),
        guards=[GuardDecision.model_validate(d) for d in json.loads(row["guards"])],
        unchecked_guards=json.loads(row["unchecked_guards"]),
        citation_id=row["citation_id"],
        citation=row["citation"],
        citation_url=row["citation_url"],
        caveats=row["caveats"],
        fs_type=row["fs_type"],
        dedup_key=row["dedup_key"],
    )


# --------------------------------------------------------------------------- public API


def opt_kb_record(
    record: KbRecordIn | Mapping[str, Any],
    *,
    baseline_analysis: Analysis | None = None,
    experiment_analysis: Analysis | None = None,
    catalog: Catalog | None = None,
    db: Path | str | None = None,
) -> KbRecord:
    """Run the four guards, decide the verdict and insert the record (never update one).

    ``record`` is re-validated here whatever its origin (a ``model_construct`` cannot skip the
    checks). Raises ``ValueError`` for an invalid record, in particular for
    ``metric_scope="system"`` without the paired app metric. With ``run_id`` set, recording the
    same input again returns the record already stored.
    """
    data = record.model_dump() if isinstance(record, KbRecordIn) else dict(record)
    rec = KbRecordIn.model_validate(data)
    fields = _build(rec, catalog or default_catalog(), baseline_analysis, experiment_analysis)
    fields["created"] = _now()
    row = _to_row(fields)
    names = list(row)
    sql = (
        f"INSERT INTO records ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)}) "
        "ON CONFLICT (dedup_key) DO NOTHING"
    )
    with _connect(db) as conn:
        conn.execute("BEGIN IMMEDIATE")
        try:
            cur = conn.execute(sql, [row[n] for n in names])
            if cur.rowcount == 1:
                stored = conn.execute("SELECT * FROM records WHERE id = ?", (cur.lastrowid,)).fetchone()
            else:
                stored = conn.execute(
                    "SELECT * FROM records WHERE dedup_key = ?", (row["dedup_key"],)
                ).fetchone()
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return _from_row(stored)


def opt_kb_records(*, db: Path | str | None = None) -> list[KbRecord]:
    """Every record, oldest first (by id)."""
    with _connect(db) as conn:
        return [_from_row(r) for r in conn.execute("SELECT * FROM records ORDER BY id")]


def opt_kb_get(record_id: int, *, db: Path | str | None = None) -> KbRecord | None:
    """One record by id, or None."""
    with _connect(db) as conn:
        row = conn.execute("SELECT * FROM records WHERE id = ?", (record_id,)).fetchone()
    return _from_row(row) if row is not None else None


def _software_items(software: str | Sequence[str] | None) -> list[str]:
    if software is None:
        return []
    items = software.split(",") if isinstance(software, str) else list(software)
    return sorted({s.strip().lower() for s in items if s.strip()})


def opt_kb_lookup(
    system: str | None = None,
    workload: str | None = None,
    software: str | Sequence[str] | None = None,
    *,
    strategy: str | None = None,
    limit: int | None = None,
    db: Path | str | None = None,
) -> KbLookup:
    """Measured findings that apply here, partitioned by scope, each list newest first.

    Scope decides transferability: ``system_findings`` are L3 records of this very ``system``
    (none when no system is given); ``workload_findings`` are L1 records of this very
    ``workload`` (none when no workload is given); ``software_findings`` are L2 records whose
    software overlaps ``software`` (a comma list or a list; all L2 records when it is not
    given), from any system and workload. ``strategy`` restricts every list to one strategy
    id; ``limit`` caps each list.
    """
    wanted = _software_items(software)
    order = " ORDER BY created DESC, id DESC"
    extra, params = ("", []) if strategy is None else (" AND strategy = ?", [strategy])
    with _connect(db) as conn:
        systems = (
            [_from_row(r) for r in conn.execute(
                "SELECT * FROM records WHERE scope = 'system' AND system = ?" + extra + order, [system, *params])]
            if system is not None else []
        )  # fmt: skip
        workloads = (
            [_from_row(r) for r in conn.execute(
                "SELECT * FROM records WHERE scope = 'workload' AND workload = ?" + extra + order, [workload, *params])]
            if workload is not None else []
        )  # fmt: skip
        softwares = [
            _from_row(r)
            for r in conn.execute("SELECT * FROM records WHERE scope = 'software'" + extra + order, params)
        ]
    if wanted:
        softwares = [r for r in softwares if set(r.software) & set(wanted)]
    if limit is not None:
        systems, softwares, workloads = systems[:limit], softwares[:limit], workloads[:limit]
    return KbLookup(
        system=system,
        workload=workload,
        software=wanted,
        strategy=strategy,
        system_findings=systems,
        software_findings=softwares,
        workload_findings=workloads,
    )
