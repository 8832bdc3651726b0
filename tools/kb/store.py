"""The optimization knowledge base: every measured (or refused) change, guarded, in SQLite.

The dftracer-io-optimization skill's ``opt_kb_record`` / ``opt_kb_lookup``. The database lives at
``$DFTUNE_HOME/kb/opt_kb.sqlite`` (every function takes ``db=`` to point elsewhere).

- ``opt_kb_record`` runs the four guards of :mod:`dftune.tools.guards` itself, so no caller
  can bypass them: citation (fails -> ``unsupported``, the change must not be applied),
  access pattern (fails -> ``rejected``), no-doing-less (needs the baseline's and the
  experiment's trace analyses; fails -> ``rejected``; without them the guard is recorded as
  NOT RUN and listed in ``unchecked_guards``, never silently passed), non-degradation (a
  ``metric_scope="system"`` result without the paired app metric is a ``ValueError``; an app
  metric more than 2% worse forces ``regression`` with ``guard_triggered``). The verdict is
  :func:`dftune.tools.kb.verdict.decide`'s, the same the run shows.
- No-ops, regressions, rejected and unsupported changes are recorded too, with every guard
  decision and its reason; records are immutable.
- Scope follows the strategy's layer and decides who inherits a finding: L3 -> ``system``
  (stays on its machine), L2 -> ``software`` (travels across systems and workloads),
  L1 -> ``workload`` (stays with its application).
- Recording the same input twice within a run (``run_id`` set), e.g. after a crash and
  ``dftune resume``, returns the first record instead of adding a duplicate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dftune.core import strictjson
from dftune.core.domain.kb import SCOPE_OF_LAYER, KbLookup, KbRecord, KbRecordIn, _layer_of
from dftune.core.domain.stats import pct_change
from dftune.core.domain.verdicts import GuardDecision, Verdict, not_run
from dftune.core.failpoint import failpoint
from dftune.core.vocabulary import Layer
from dftune.tools.catalog import Catalog, Strategy, default_catalog
from dftune.tools.guards import (
    Arm,
    access_pattern_guard,
    citation_guard,
    doing_less_by_definition,
    no_doing_less_guard,
    non_degradation_guard,
    reference_guard,
    work_done,
)
from dftune.tools.kb.schema import connect, from_row, now, to_row
from dftune.tools.kb.verdict import decide
from dftune.tools.trace.model import Analysis


@dataclass(frozen=True)
class MeasuredArms:
    """The traced arms a record compares: the run's baseline, the incumbent the experiment was
    measured against, and the experiment (each with its data folder and work counters)."""

    baseline: Arm | None = None
    incumbent: Arm | None = None
    experiment: Arm | None = None

    @classmethod
    def of(
        cls, baseline: Analysis | None, experiment: Analysis | None, incumbent: Analysis | None = None
    ) -> MeasuredArms:
        """Bare analyses (no data folder, no work counters), as MCP clients hand them in."""

        def arm(a: Analysis | None, label: str) -> Arm | None:
            return Arm(analysis=a, label=label) if a is not None else None

        return cls(arm(baseline, "baseline"), arm(incumbent, "incumbent"), arm(experiment, "experiment"))


def _doing_less_decision(strategy: Strategy | None, arms: MeasuredArms) -> GuardDecision:
    if arms.baseline is not None and arms.experiment is not None:
        return no_doing_less_guard(
            arms.baseline, arms.experiment, incumbent=arms.incumbent, strategy=strategy
        )
    if strategy is not None and (by_definition := doing_less_by_definition(strategy)) is not None:
        return by_definition
    missing = [n for n, a in (("baseline", arms.baseline), ("experiment", arms.experiment)) if a is None]
    return not_run(
        "no_doing_less",
        f"no {' and no '.join(missing)} trace analysis given, so the work done (bytes and calls per family, "
        "files, epochs, steps, checkpoints) was NOT compared with the baseline's; a speed-up here may be "
        "doing less",
        missing=missing,
    )


def _access_decision(rec: KbRecordIn, strategy: Strategy | None, arms: MeasuredArms) -> GuardDecision:
    if strategy is None:
        return not_run("access_pattern", f"{rec.strategy} is not in the strategy catalog")
    reference = arms.incumbent or arms.baseline
    decision = access_pattern_guard(strategy, reference, arms.experiment, baseline=arms.baseline)
    if decision.verdict == "inconclusive" and rec.confirmed_by:
        return decision.model_copy(
            update={
                "passed": True,
                "verdict": None,
                "reason": f"confirmed by a person ({rec.confirmed_by}) after: {decision.reason}",
            }
        )
    if decision.verdict == "inconclusive" and rec.refused_by:
        return decision.model_copy(
            update={
                "verdict": "rejected",
                "reason": f"refused by a person ({rec.refused_by}) after: {decision.reason}",
            }
        )
    return decision


def _non_degradation(rec: KbRecordIn) -> GuardDecision:
    """A system-scoped result is judged on its paired app metric; an app-scoped one that came with
    a system-level effect (``system_before``/``system_after``) is judged on its own metric."""
    if rec.metric_scope == "system":
        return non_degradation_guard(
            metric_scope="system",
            app_before=rec.app_before,
            app_after=rec.app_after,
            lower_is_better=rec.app_lower_is_better,
            app_verdict=rec.app_verdict,
        )
    if rec.system_before is not None:
        return non_degradation_guard(
            metric_scope="system",
            app_before=rec.before,
            app_after=rec.after,
            lower_is_better=rec.lower_is_better,
            app_verdict=rec.comparison.verdict if rec.comparison is not None else None,
        )
    return non_degradation_guard(metric_scope="app", app_before=None, app_after=None)


def _dedup_key(rec: KbRecordIn, arms: MeasuredArms) -> str | None:
    if rec.run_id is None:
        return None
    doc = {
        "input": rec.model_dump(mode="json"),
        "baseline": work_done(arms.baseline.analysis) if arms.baseline is not None else None,
        "experiment": work_done(arms.experiment.analysis) if arms.experiment is not None else None,
    }
    blob = strictjson.dumps_checked(doc, "the knowledge base record", sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _build(rec: KbRecordIn, catalog: Catalog, arms: MeasuredArms) -> dict[str, Any]:
    """Run the guards and decide the verdict; returns the record's fields (without id/created)."""
    strategy = catalog.strategies.get(rec.strategy)
    cit = citation_guard(rec.strategy, catalog)
    if not cit.passed and rec.found_citation is not None:
        cit = reference_guard(rec.found_citation, rec.strategy)
    access = _access_decision(rec, strategy, arms)
    doing_less = _doing_less_decision(strategy, arms)
    non_degradation = _non_degradation(rec)
    if rec.metric_scope == "system" and not non_degradation.passed and not non_degradation.guard_triggered:
        # unreachable through KbRecordIn's validation; kept so the rule holds on its own
        raise ValueError(non_degradation.reason)
    decisions = [cit, access, doing_less, non_degradation]

    if rec.failed:  # nothing was measured to judge: the program did not run under the change
        verdict: Verdict = "failed"
        reason, change_pct, triggered = f"the program failed under this change: {rec.failed}", None, False
    else:
        decided = decide(
            decisions,
            metric=rec.metric,
            before=rec.before,
            after=rec.after,
            lower_is_better=rec.lower_is_better,
            comparison=rec.comparison,
            before_ci=rec.before_ci,
            after_ci=rec.after_ci,
        )
        verdict, reason = decided.verdict, decided.reason
        change_pct, triggered = decided.change_pct, decided.guard_triggered

    citation_id = cit.details.get("citation") if cit.passed else None
    c = catalog.citations.get(citation_id) if citation_id else None
    found = rec.found_citation if cit.passed and c is None else None
    cmp = rec.comparison
    layer: Layer = strategy.layer if strategy is not None else _layer_of(rec.strategy)
    app_change = pct_change(rec.app_before, rec.app_after, lower_is_better=rec.app_lower_is_better)
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
        "guard_triggered": triggered,
        "guards": decisions,
        "unchecked_guards": [d.guard for d in decisions if d.details.get("ran") is False],
        "citation_id": citation_id,
        "citation": c.reference() if c is not None else found.reference() if found is not None else None,
        "citation_url": c.link() if c is not None else found.url if found is not None else None,
        "caveats": rec.caveats,
        "fs_type": rec.fs_type,
        "dedup_key": _dedup_key(rec, arms),
        "supersedes": rec.supersedes,
    }


# --------------------------------------------------------------------------- public API


def opt_kb_record(
    record: KbRecordIn | Mapping[str, Any],
    *,
    baseline_analysis: Analysis | None = None,
    experiment_analysis: Analysis | None = None,
    arms: MeasuredArms | None = None,
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
    measured = arms if arms is not None else MeasuredArms.of(baseline_analysis, experiment_analysis)
    fields = _build(rec, catalog or default_catalog(), measured)
    fields["created"] = now()
    row = to_row(fields)
    names = list(row)
    sql = (
        f"INSERT INTO records ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)}) "
        "ON CONFLICT (dedup_key) DO NOTHING"
    )
    with connect(db) as conn:
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
    failpoint("kb.inserted")
    return from_row(stored)


def _settled(conn: Any, records: list[KbRecord]) -> list[KbRecord]:
    """Each record with the later record that settles it (a pending change's answer, a re-measurement)."""
    later = {
        row[0]: row[1]
        for row in conn.execute(
            "SELECT supersedes, MIN(id) FROM records WHERE supersedes IS NOT NULL GROUP BY supersedes"
        )
    }
    return [r.model_copy(update={"superseded_by": later[r.id]}) if r.id in later else r for r in records]


def opt_kb_records(*, db: Path | str | None = None) -> list[KbRecord]:
    """Every record, oldest first (by id), settled ones included (with ``superseded_by``)."""
    with connect(db) as conn:
        return _settled(conn, [from_row(r) for r in conn.execute("SELECT * FROM records ORDER BY id")])


def opt_kb_get(record_id: int, *, db: Path | str | None = None) -> KbRecord | None:
    """One record by id, or None."""
    with connect(db) as conn:
        row = conn.execute("SELECT * FROM records WHERE id = ?", (record_id,)).fetchone()
        return _settled(conn, [from_row(row)])[0] if row is not None else None


def opt_kb_of_experiment(run_id: str, iteration: int, *, db: Path | str | None = None) -> list[KbRecord]:
    """Every record of one experiment of one run, oldest first (``superseded_by`` says which stand)."""
    with connect(db) as conn:
        rows = conn.execute(
            "SELECT * FROM records WHERE run_id = ? AND iteration = ? ORDER BY id", (run_id, iteration)
        ).fetchall()
        return _settled(conn, [from_row(x) for x in rows])


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

    Scope decides transferability: ``system_findings`` are L3 records of this very ``system``;
    ``workload_findings`` are L1 records of this very ``workload`` (none when no workload is
    given); ``software_findings`` are L2 records whose software overlaps ``software`` (a comma
    list or a list; all L2 records when it is not given), from any system and workload. A
    ``workload`` asked without a ``system`` (and without ``software``) gets its own records at every
    layer: the L3 records of its runs, on whatever machine, and the L2 records it measured.
    ``strategy`` restricts every list to one strategy
    id; ``limit`` caps each list. A record a later one settles (a pending change a person answered,
    a measurement taken again) is left out: the later record is the finding; a change still waiting
    for a person is listed with the verdict ``pending``.
    """
    wanted = _software_items(software)
    order = " ORDER BY created DESC, id DESC"
    extra, params = ("", []) if strategy is None else (" AND strategy = ?", [strategy])

    def rows(scope: str, where: str, values: list[Any]) -> list[KbRecord]:
        query = f"SELECT * FROM records WHERE scope = '{scope}'{where}{extra}{order}"
        return [from_row(r) for r in conn.execute(query, [*values, *params])]

    # a workload asked alone: its own records at every layer (the L3 ones of whatever machine
    # it ran on, the L2 ones it measured), not every machine's or every program's
    alone = workload is not None and system is None
    with connect(db) as conn:
        if system is not None:
            systems = rows("system", " AND system = ?", [system])
        else:
            systems = rows("system", " AND workload = ?", [workload]) if alone else []
        workloads = rows("workload", " AND workload = ?", [workload]) if workload is not None else []
        mine = alone and not wanted
        softwares = rows("software", " AND workload = ?" if mine else "", [workload] if mine else [])
        systems, workloads, softwares = (
            [r for r in _settled(conn, rs) if r.superseded_by is None]
            for rs in (systems, workloads, softwares)
        )
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
