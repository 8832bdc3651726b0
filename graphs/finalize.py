"""The last node: final checklist, summary, KB skill file, report.md and report.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.budget import Budget
from dftune.agents.context import Context
from dftune.agents.measure import joined_baseline
from dftune.agents.optimizer import checklist_verdicts, facts_of, proposal_table
from dftune.core import strictjson
from dftune.core.domain.experiments import Experiment
from dftune.core.domain.run import KeptChange, Outcome, RunReport, TuningState, Update, log, update
from dftune.core.domain.stats import pct_change
from dftune.core.errors import one_line
from dftune.core.fsio import atomic_write_bytes
from dftune.tools.bundle import run_bundle, verify_copy
from dftune.tools.kb import opt_kb_render
from dftune.tools.report import render_run_markdown
from dftune.tools.report.sections import metric_info
from dftune.tools.runner.spec import WorkloadSpec


def run_report(state: TuningState, spec: WorkloadSpec, *, summary: str = "", **final: Any) -> RunReport:
    """The run's document: the state (with ``final`` fields set, e.g. an interim status), its
    proposal table, the summary and the outcome."""
    state = state.model_copy(update=final) if final else state
    return RunReport(
        **{name: getattr(state, name) for name in TuningState.model_fields},
        proposal_table=proposal_table(state.proposals),
        summary=summary,
        outcome=outcome(state, lower_is_better=spec.metric.lower_is_better),
        metric=metric_info(spec),
    )


def write_report(run_dir: Path, report: RunReport) -> Path:
    """``report.json`` and ``report.md`` of a run; returns the Markdown report's path."""
    doc = report.model_dump(mode="json", by_alias=True)
    atomic_write_bytes(run_dir / "report.json", strictjson.dumps(doc, indent=1).encode("utf-8"))
    atomic_write_bytes(run_dir / "report.md", render_run_markdown(report).encode("utf-8"))
    return run_dir / "report.md"


def outcome(state: TuningState, *, lower_is_better: bool) -> Outcome:
    def kept(e: Experiment) -> KeptChange:
        return KeptChange(
            strategy=e.strategy,
            proposal=e.proposal_id,
            iteration=e.iteration,
            change_pct=e.change_pct or 0.0,
            question=e.question,
        )

    base = state.baseline.median if state.baseline else None
    best = state.incumbent.median if state.incumbent else None
    return Outcome(
        status=state.status,
        status_reason=state.status_reason,
        experiments=len(state.experiments),
        wins=[kept(e) for e in state.experiments if e.kept and e.verdict == "win"],
        # kept on trial: the best configuration includes them until a person answers
        pending=[kept(e) for e in state.pending],
        baseline_median=base,
        best_median=best,
        overall_pct=pct_change(base, best, lower_is_better=lower_is_better) or 0.0,
    )


def finalize(state: TuningState, runtime: Runtime[Context]) -> Update:
    ctx = runtime.context
    status = state.status if state.status in ("failed", "not_worth_tuning") else "completed"
    late = _join_units(state, ctx)
    checklist = checklist_verdicts(state.model_copy(update=late)) if state.baseline else state.checklist
    # the final view; the update carries it
    state = state.model_copy(update={**late, "status": status, "checklist": checklist})
    out = outcome(state, lower_is_better=ctx.workload_spec.metric.lower_is_better)
    judged = ctx.reasoner.summarize(facts_of(state, spec=ctx.workload_spec), out)
    skill = opt_kb_render(db=ctx.kb_db) if state.kb_records else None
    decisions = [*state.decisions, judged.decision]  # the report shows this one too
    doc = run_report(
        state,
        ctx.workload_spec,
        summary=judged.answer,
        decisions=decisions,
        kb_skill_path=str(skill) if skill else None,
    )
    run_dir = ctx.workspace.run_dir(state.run_id)
    report = write_report(run_dir, doc)
    try:  # the kept configuration, to carry away and verify anywhere (docs/bundle.md)
        bundle = run_bundle(doc, run_dir)
    except Exception as exc:  # an extra the run's result never depends on: say why it is missing
        ctx.progress("report", f"no bundle: {type(exc).__name__}: {one_line(exc)}")
    else:
        if bundle is not None:
            ctx.progress("report", f"bundle: {bundle} (dftune verify {bundle})")
            _check_bundle(bundle, state, ctx)
    waiting = len(state.pending)  # the run is over; its changes on trial still wait for a person
    ask = (
        f"dftune approve {state.run_id} [--reject] ({waiting} change(s) pending confirmation)"
        if waiting
        else None
    )
    ctx.workspace.set_status(state.run_id, status, reason=state.status_reason, next_step=ask)
    ctx.progress("report", f"report: {report}")
    return update(
        **late,
        status=status,
        checklist=checklist,
        report_path=str(report),
        decisions=[judged.decision],
        kb_skill_path=str(skill) if skill else None,
        events=[log("report", judged.answer, report=str(report))],
    )


def _check_bundle(bundle: Path, state: TuningState, ctx: Context) -> None:
    """Verify the run's bundle once from a copy, as the reference pipeline validates its final
    report before calling it done: when the budget leaves time for one more sitting of
    ``verify_pairs`` pairs. The result is appended to the bundle; a failure only says why."""
    if state.verify_pairs <= 0:
        return
    run_dir = ctx.workspace.run_dir(state.run_id)
    budget = ctx.budget or Budget()
    if budget.units is not None:  # a campaign's workloads share one measurement slot
        ctx.progress(
            "report",
            "bundle not checked from a copy: in a campaign the other workloads need the measurement "
            f"slot first; dftune verify {bundle} checks it",
        )
        return
    sitting = budget.arm_estimate(run_dir)
    if budget.deadline is not None and sitting is not None:
        # a sitting of `replicates` pairs took this long; the check must leave as much again to
        # what else the deadline covers (a campaign's other workloads, the reports)
        pairs = state.verify_pairs / (state.replicates or ctx.workload_spec.replicates)
        why = budget.deadline.refuse("the bundle's check", 2 * sitting * max(1.0, pairs))
        if why:
            ctx.progress("report", f"bundle not checked from a copy: {why}")
            return
    try:
        with budget.job(run_dir, "bundle check", ctx.workload_spec, arm=False):
            doc = verify_copy(bundle, rounds=state.verify_pairs, measurer=ctx.measurer)
    except Exception as exc:  # the run's result never depends on it: say why it is missing
        ctx.progress("report", f"bundle not checked from a copy: {type(exc).__name__}: {one_line(exc)}")
    else:
        ctx.progress("report", f"bundle checked from a copy: {doc.line()}")


def _join_units(state: TuningState, ctx: Context) -> dict[str, Any]:
    """Baseline units still running join the report (until the deadline's reserve), so it covers them."""
    budget = ctx.budget
    if budget is None or budget.units is None or state.baseline is None:
        return {}
    budget.units.wait_all(budget.deadline.at - budget.deadline.reserve_s if budget.deadline else None)
    joined = joined_baseline(ctx, state.baseline, state.replicates or ctx.workload_spec.replicates)
    if joined is None:
        return {}
    out: dict[str, Any] = {"baseline": joined[0], "coverage": joined[1]}
    if state.incumbent is not None and state.incumbent.workdir == joined[0].workdir:
        out["incumbent"] = joined[0]
    return out
