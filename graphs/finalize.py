"""The last node: final checklist, summary, KB skill file, report.md and report.json."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.measure import joined_baseline
from dftune.agents.optimizer import checklist_verdicts, facts_of, proposal_table
from dftune.agents.state import TuningState, log
from dftune.core import strictjson
from dftune.core.fsio import atomic_write_bytes
from dftune.tools.kb import opt_kb_render
from dftune.tools.report import render_run_markdown
from dftune.tools.report.sections import metric_info
from dftune.tools.runner.stats import pct_change


def state_json(state: TuningState) -> dict[str, Any]:
    """The state as one plain JSON document (the report's and ``dftune run --json``'s input)."""
    from dataclasses import fields

    from pydantic import BaseModel

    def plain(v: Any) -> Any:
        if isinstance(v, BaseModel):
            return v.model_dump(mode="json")
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    doc = {f.name: plain(getattr(state, f.name)) for f in fields(state)}
    doc["proposal_table"] = proposal_table(state.proposals)
    return doc


def outcome(state: TuningState, *, lower_is_better: bool) -> dict[str, Any]:
    lib = lower_is_better
    wins = [
        {
            "strategy": e.strategy,
            "proposal": e.proposal_id,
            "iteration": e.iteration,
            "change_pct": e.comparison.change_pct if e.comparison else 0.0,
        }
        for e in state.experiments
        if e.kept and e.verdict == "win"
    ]
    # kept on trial: the best configuration includes them until a person answers
    pending = [
        {
            "strategy": e.strategy,
            "proposal": e.proposal_id,
            "iteration": e.iteration,
            "change_pct": e.comparison.change_pct if e.comparison else 0.0,
            "question": e.question,
        }
        for e in state.pending
    ]
    base = state.baseline.median if state.baseline else None
    best = state.incumbent.median if state.incumbent else None
    return {
        "status": state.status,
        "status_reason": state.status_reason,
        "experiments": len(state.experiments),
        "wins": wins,
        "pending": pending,
        "baseline_median": base,
        "best_median": best,
        "overall_pct": pct_change(base, best, lower_is_better=lib) or 0.0,
    }


def finalize(state: TuningState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    status = state.status if state.status in ("failed", "not_worth_tuning") else "completed"
    late = _join_units(state, ctx)
    state = replace(state, **late)
    checklist = checklist_verdicts(state) if state.baseline else state.checklist
    state = replace(state, status=status, checklist=checklist)  # the final view; the update carries it
    out = outcome(state, lower_is_better=ctx.workload_spec.metric.lower_is_better)
    judged = ctx.reasoner.summarize(facts_of(state, spec=ctx.workload_spec), out)
    summary = judged.answer
    state = replace(state, decisions=[*state.decisions, judged.decision])  # the report shows this one too
    run_dir = ctx.workspace.run_dir(state.run_id)
    skill = opt_kb_render(db=ctx.kb_db) if state.kb_records else None
    state = replace(state, kb_skill_path=str(skill) if skill else None)
    doc = {**state_json(state), "summary": summary, "outcome": out, "metric": metric_info(ctx.workload_spec)}
    atomic_write_bytes(run_dir / "report.json", strictjson.dumps(doc, indent=1, default=str).encode("utf-8"))
    report = run_dir / "report.md"
    atomic_write_bytes(report, render_run_markdown(doc).encode("utf-8"))
    waiting = len(state.pending)  # the run is over; its changes on trial still wait for a person
    ask = (
        f"dftune approve {state.run_id} [--reject] ({waiting} change(s) pending confirmation)"
        if waiting
        else None
    )
    ctx.workspace.set_status(state.run_id, status, reason=state.status_reason, next_step=ask)
    ctx.progress("report", f"report: {report}")
    return {
        **late,
        "status": status,
        "checklist": checklist,
        "report_path": str(report),
        "decisions": [judged.decision],
        "kb_skill_path": state.kb_skill_path,
        "events": [log("report", summary, report=str(report))],
    }


def _join_units(state: TuningState, ctx: Context) -> dict[str, Any]:
    """Baseline units still running join the report (until the deadline's reserve), so it covers them."""
    budget = ctx.budget
    if budget is None or budget.units is None or state.baseline is None:
        return {}
    budget.units.wait_all(budget.deadline.at - budget.deadline.reserve_s if budget.deadline else None)
    joined = joined_baseline(ctx, state.baseline, state.replicates or ctx.workload_spec.replicates)
    if joined is None:
        return {}
    update: dict[str, Any] = {"baseline": joined[0], "coverage": joined[1]}
    if state.incumbent is not None and state.incumbent.workdir == joined[0].workdir:
        update["incumbent"] = joined[0]
    return update
