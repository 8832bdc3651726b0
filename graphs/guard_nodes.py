"""The guard nodes and the KB record node: code, not prompts, in front of every record.

``screen`` runs before anything is applied: the citation guard (no verifiable citation ->
UNSUPPORTED), the access-pattern guard and the doing-less-by-definition check (forbidden
strategies -> rejected). ``judge`` runs after an experiment: the no-doing-less guard on the
two traces and the non-degradation guard on the paired application metric. ``record`` hands
every decided item to ``opt_kb_record`` (which runs the same guards again, so no caller can
bypass them), keeps a win, keeps a win the traces cannot settle on trial until a person answers
(:mod:`graphs.pending`), and reverts anything else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from dftune.agents.context import Context
from dftune.agents.measure import SEEN_FILE, load_analysis
from dftune.agents.optimizer import journal_for
from dftune.agents.optimizer.explain import explain_verdict
from dftune.core import strictjson
from dftune.core.domain.experiments import Experiment, GuardRecord
from dftune.core.domain.kb import KbRecord
from dftune.core.domain.measurements import Measurement
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import PatternQuestion, TuningState, Update, log, update
from dftune.core.domain.stats import pct_change
from dftune.core.domain.verdicts import GuardDecision
from dftune.graphs.approval import parse_answer
from dftune.tools.guards import (
    Arm,
    access_pattern_guard,
    citation_guard,
    doing_less_by_definition,
    no_doing_less_guard,
    non_degradation_guard,
    reference_guard,
)
from dftune.tools.kb import opt_kb_of_experiment, opt_kb_record
from dftune.tools.kb.store import MeasuredArms
from dftune.tools.runner.env_gate import read_only_by_calls
from dftune.tools.runner.metric_names import metric_label
from dftune.tools.runner.spec import WorkloadSpec

#: A trace-derived system metric that moved this much makes the change a system-level result too.
SYSTEM_RESULT_MIN_PCT = 5.0
BANDWIDTH_METRIC = "io_bandwidth_bytes_per_s"


def screen_decisions(p: Proposal, ctx: Context) -> list[GuardDecision]:
    """The guards that can decide before anything is applied."""
    strategy = ctx.catalog.strategies.get(p.strategy)
    decisions: list[GuardDecision] = []
    if strategy is not None:
        decisions.append(access_pattern_guard(strategy))
        by_definition = doing_less_by_definition(strategy)
        if by_definition is not None:
            decisions.append(by_definition)
    if p.citation is not None and p.citation.source != "catalog":
        decisions.append(reference_guard(p.citation, p.strategy))
    else:
        decisions.append(citation_guard(p.strategy, ctx.catalog))
    return decisions


def screen(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Guard node: nothing forbidden or uncited reaches the proposal table."""
    ctx = runtime.context
    updated, records, events = [], [], []
    for p in state.proposals:
        if p.status not in ("proposed", "manual"):
            continue
        decisions = screen_decisions(p, ctx)
        records += [GuardRecord(proposal_id=p.id, decision=d) for d in decisions]
        failed = [d for d in decisions if not d.passed]
        if not failed:
            continue
        rejected = [d for d in failed if d.verdict == "rejected"]
        status = "rejected" if rejected else "unsupported"
        reason = "; ".join(f"{d.guard}: {d.reason}" for d in (rejected or failed))
        updated.append(p.model_copy(update={"status": status, "reason": reason}))
        events.append(log("guards", f"{p.id}: {status}: {reason}"))
    ctx.progress("guards", f"screened {len(state.proposals)} candidate(s): {len(updated)} refused")
    return update(proposals=updated, guard_decisions=records, screened=True, events=events)


def arm_of(m: Measurement | None, label: str, library_only: str = "") -> Arm | None:
    """A measured arm as the guards compare it (None without its trace analysis)."""
    analysis = load_analysis(m.analysis_path) if m is not None else None
    if m is None or analysis is None:
        return None
    return Arm(
        analysis=analysis,
        data_dir=m.data_dir,
        work=dict(m.work),
        label=label,
        staged_dir=m.staged_dir,
        workdir=m.workdir,
        env=dict(m.env),
        library_only=library_only,
        seen_paths=_seen_paths(Path(m.workdir)),
    )


def _seen_paths(workdir: Path) -> dict[str, frozenset[str]]:
    """The files every replicate of an arm touched (agents/measure.py writes them), or none."""
    try:
        doc = strictjson.read_file(workdir / SEEN_FILE)  # bounded, a regular file only
    except ValueError:
        return {}
    if not isinstance(doc, dict):
        return {}
    return {
        d: frozenset(map(str, v)) for d, v in doc.items() if d in ("read", "write") and isinstance(v, list)
    }


def library_only(state: TuningState, exp: Experiment) -> str:
    """Why the experiment's change cannot reach the program's own code, or "": every knob it
    changed is an env lever of the run's patched copy, read there only as an I/O call's argument."""
    levers = state.levers
    if levers is None or not levers.source_copy or exp.candidate is None:
        return ""
    before, after = exp.reference.settings, exp.candidate.settings
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    env_levers = {lv.knob for lv in levers.found if lv.kind == "env"}
    if not changed or not set(changed) <= env_levers:
        return ""
    return read_only_by_calls(Path(levers.source_copy), changed) or ""


def measured_arms(state: TuningState, exp: Experiment) -> MeasuredArms:
    """The baseline, the incumbent the experiment ran against, and the experiment."""
    return MeasuredArms(
        baseline=arm_of(state.baseline, "baseline"),
        incumbent=arm_of(exp.reference, "incumbent"),
        experiment=arm_of(exp.candidate, "experiment", library_only(state, exp)),
    )


def judge(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Guard node after an experiment: the same work, the same access pattern, and did the application
    pay for it? A pattern the traces cannot settle is asked of a person in interactive mode (the
    node computes before it asks and has no side effect, so re-running it on resume is safe); an
    autonomous run records a win it cannot settle as pending and asks in the morning."""
    ctx = runtime.context
    exp = state.experiments[-1]
    if exp.verdict == "failed" or exp.candidate is None or state.baseline is None:
        return update()
    spec = ctx.workload_spec
    strategy = ctx.catalog.strategies.get(exp.strategy)
    arms = measured_arms(state, exp)
    records = []
    if arms.baseline is not None and arms.experiment is not None:
        records.append(
            no_doing_less_guard(arms.baseline, arms.experiment, incumbent=arms.incumbent, strategy=strategy)
        )
    if strategy is not None and arms.incumbent is not None and arms.experiment is not None:
        records.append(
            access_pattern_guard(strategy, arms.incumbent, arms.experiment, baseline=arms.baseline)
        )
    # the same rule as record: only a change that moved the system metric is judged as a system optimization
    moved = pct_change(exp.reference.io_bandwidth, exp.candidate.io_bandwidth, lower_is_better=False)
    scope: Literal["app", "system"] = (
        "system" if moved is not None and abs(moved) >= SYSTEM_RESULT_MIN_PCT else "app"
    )
    records.append(
        non_degradation_guard(
            metric_scope=scope,
            app_before=exp.reference.median,
            app_after=exp.candidate.median,
            lower_is_better=spec.metric.lower_is_better,
            app_verdict=exp.comparison.verdict if exp.comparison is not None else None,
        )
    )
    events = [
        log("guards", f"opt{exp.iteration}: {d.guard} {'passed' if d.passed else 'FAILED'}: {d.reason}")
        for d in records
    ]
    out: dict[str, Any] = {
        "guard_decisions": [
            GuardRecord(proposal_id=exp.proposal_id, iteration=exp.iteration, decision=d) for d in records
        ],
        "events": events,
    }
    unsure = [d for d in records if d.verdict == "inconclusive"]
    if unsure and state.mode == "interactive" and exp.confirmed_by is None and exp.refused_by is None:
        ask = PatternQuestion(
            run_id=state.run_id,
            proposal_id=exp.proposal_id,
            iteration=exp.iteration,
            question=unsure[0].reason,
            resume_with=f"dftune approve {state.run_id} (it is a legitimate change) or --reject",
        )
        answer, why = parse_answer(interrupt(ask.model_dump(mode="json")))
        while answer is None:  # a malformed answer confirms nothing: the run keeps asking
            ask = ask.model_copy(update={"refused": why})
            answer, why = parse_answer(interrupt(ask.model_dump(mode="json")))
        confirmed, note = answer.decision == "approve", answer.reason
        if confirmed:
            out["experiments"] = [exp.model_copy(update={"confirmed_by": note or "a person"})]
            events.append(log("guards", f"opt{exp.iteration}: a person confirmed the change ({note})"))
        else:
            out["experiments"] = [exp.model_copy(update={"refused_by": note or "a person"})]
            events.append(
                log("guards", f"opt{exp.iteration}: a person did not confirm the change; it is not kept")
            )
    return update(out)


def _metric_name(spec: WorkloadSpec) -> str:
    return metric_label(spec.metric)[0]


def _base_record(state: TuningState, spec: WorkloadSpec, p: Proposal) -> dict[str, Any]:
    """The fields every KB record of this run shares (the spec is read once per node, by the caller)."""
    return {
        "run_id": state.run_id,
        "system": state.system or "localhost",
        "workload": state.workload or "workload",
        "software": state.software or ["posix"],
        "strategy": p.strategy,
        "fs_type": state.fs_type,
        "change": {
            "settings": p.change.settings,
            "env": p.change.env,
            "argv": p.change.argv,
            "proposal": p.id,
        },
        "metric": _metric_name(spec),
        "lower_is_better": spec.metric.lower_is_better,
        "caveats": "; ".join(x.message for x in state.pitfalls),
        "found_citation": p.citation.model_dump() if p.citation and p.citation.source != "catalog" else None,
    }


def _record_screened(
    state: TuningState, spec: WorkloadSpec, ctx: Context
) -> tuple[list[Proposal], list[int]]:
    """Refused proposals are knowledge too: recorded with the guard's reason, never applied."""
    out, ids = [], []
    for p in state.proposals:
        if p.status in ("unsupported", "rejected") and p.kb_record_id is None and p.iteration is None:
            rec = opt_kb_record(_base_record(state, spec, p), catalog=ctx.catalog, db=ctx.kb_db)
            out.append(p.model_copy(update={"kb_record_id": rec.id}))
            ids.append(rec.id)
    return out, ids


def record_failure(state: TuningState, spec: WorkloadSpec, ctx: Context, exp: Experiment) -> KbRecord:
    """The KB record of a change the program refused or crashed under (nothing to compare)."""
    p = state.proposal(exp.proposal_id)
    base = _base_record(state, spec, p)
    base["change"] = {
        **base["change"],
        "incumbent": {
            "settings": {k: str(v) for k, v in exp.reference.settings.items()},
            "env": dict(exp.reference.env),
        },
    }
    return opt_kb_record(
        {**base, "iteration": exp.iteration, "failed": exp.program_failed},
        arms=measured_arms(state, exp),
        catalog=ctx.catalog,
        db=ctx.kb_db,
    )


def record_experiment(
    state: TuningState, spec: WorkloadSpec, ctx: Context, exp: Experiment, settles: int | None = None
) -> tuple[KbRecord, KbRecord | None]:
    """The experiment's KB record (and its system-level one). ``settles``: the iteration whose records
    these settle (a pending change's own, when a person answers; a voided one, measured again)."""
    assert exp.candidate is not None and exp.comparison is not None and state.baseline is not None
    p = state.proposal(exp.proposal_id)
    lib = spec.metric.lower_is_better
    cmp = exp.comparison
    arms = measured_arms(state, exp)
    earlier = opt_kb_of_experiment(state.run_id, settles, db=ctx.kb_db) if settles is not None else []
    if settles == exp.iteration:  # a person's answer settles this very experiment's pending records
        earlier = [r for r in earlier if r.verdict == "pending"]
    # chosen from what is on disk whatever settled it since, so a node re-run after a crash records the
    # same input again (the KB returns the record it already has instead of adding one)
    app_earlier = max((r.id for r in earlier if r.metric_scope == "app"), default=None)
    system_earlier = max((r.id for r in earlier if r.metric_scope == "system"), default=None)
    common = {
        **_base_record(state, spec, p),
        "iteration": exp.iteration,
        "confirmed_by": exp.confirmed_by,
        "refused_by": exp.refused_by,
    }
    # what the change was measured against: a later run re-tries a known no_change only against another one
    common["change"] = {
        **common["change"],
        "incumbent": {
            "settings": {k: str(v) for k, v in exp.reference.settings.items()},
            "env": dict(exp.reference.env),
        },
    }
    ref_bw, cand_bw = exp.reference.io_bandwidth, exp.candidate.io_bandwidth
    moved = pct_change(ref_bw, cand_bw, lower_is_better=False)
    # a change that moved the system metric is a system-level result too: it is only kept when the
    # application did not pay for it, and the app record is judged by the same guard (one verdict)
    system_effect = moved is not None and abs(moved) >= SYSTEM_RESULT_MIN_PCT
    paired = (
        {"system_metric": BANDWIDTH_METRIC, "system_before": ref_bw, "system_after": cand_bw}
        if system_effect
        else {}
    )
    rec = opt_kb_record(
        {
            **common,
            **paired,
            "comparison": cmp,
            "supersedes": app_earlier,
            "before_ci": tuple(exp.reference.ci95) if exp.reference.ci95 else None,
            "after_ci": tuple(exp.candidate.ci95) if exp.candidate.ci95 else None,
        },
        arms=arms,
        catalog=ctx.catalog,
        db=ctx.kb_db,
    )
    system_rec = None
    if system_effect and moved is not None and moved > 0:
        system_rec = opt_kb_record(
            {
                **common,
                "supersedes": system_earlier,
                "metric": BANDWIDTH_METRIC,
                "metric_scope": "system",
                "lower_is_better": False,
                "before": ref_bw,
                "after": cand_bw,
                "app_metric": common["metric"],
                "app_before": exp.reference.median,
                "app_after": exp.candidate.median,
                "app_lower_is_better": lib,
                "app_verdict": cmp.verdict if cmp is not None else None,
                "caveats": (common["caveats"] + "; " if common["caveats"] else "")
                + "system metric is a trace-derived proxy (bytes per second of I/O wall time), not "
                "filesystem-side telemetry",
            },
            arms=arms,
            catalog=ctx.catalog,
            db=ctx.kb_db,
        )
    return rec, system_rec


def question_of(rec: KbRecord) -> str:
    """What a person must answer about a pending record: the guard's own words."""
    unsure = [d.reason for d in rec.guards if d.verdict == "inconclusive"]
    return "; ".join(unsure) or rec.verdict_reason


def revert(ctx: Context, state: TuningState, exp: Experiment) -> None:
    """Undo the experiment's journaled changes (a no-op for those already reverted, e.g. on resume)."""
    journal = journal_for(ctx, state.run_id)
    for cid in exp.change_ids:
        if journal.state(cid) == "applied":
            journal.revert(cid)


def record(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: every decided item into the KB (guards enforced there too), then keep or revert."""
    ctx = runtime.context
    spec = ctx.workload_spec
    proposals, ids = _record_screened(state, spec, ctx)
    out: dict[str, Any] = {"proposals": proposals, "kb_records": ids, "events": []}
    if ids:
        out["events"].append(log("kb", f"recorded {len(ids)} refused proposal(s)", ids=ids))
    exp = state.experiments[-1] if state.experiments else None
    if exp is None or exp.kb_record_id is not None or exp.kept or exp.reverted:
        return update(out)
    if exp.verdict == "failed" or exp.candidate is None or exp.comparison is None:
        revert(ctx, state, exp)
        done = exp.model_copy(update={"reverted": True})
        if exp.program_failed:  # remembered: later runs do not spend an experiment on it again
            failure = record_failure(state, spec, ctx, exp)
            done = done.model_copy(update={"kb_record_id": failure.id})
            out["kb_records"] = [*ids, failure.id]
            ctx.progress("kb", f"opt{exp.iteration} {exp.proposal_id}: failed -> KB record {failure.id}")
        out["experiments"] = [done]
        return update(out)
    p = state.proposal(exp.proposal_id)
    rec, system_rec = record_experiment(state, spec, ctx, exp, settles=p.remeasures)
    verdict, guard_triggered = rec.verdict, rec.guard_triggered  # the one verdict (kb.verdict.decide)
    # a win the traces cannot settle stays on the incumbent, on trial, until a person answers: the search
    # goes on on top of it, and a refusal measures again what was kept since (graphs.pending)
    keep = verdict in ("win", "pending")
    question = question_of(rec) if verdict == "pending" else ""
    if not keep:
        revert(ctx, state, exp)  # journaled changes (env, commands); knob settings stay off the incumbent
    done = exp.model_copy(
        update={
            "verdict": verdict,
            "verdict_reason": rec.verdict_reason,
            "kept": keep,
            "reverted": not keep,
            "guard_triggered": guard_triggered,
            "kb_record_id": rec.id,
            "question": question,
        }
    )
    p = p.model_copy(update={"kb_record_id": rec.id})
    explained = explain_verdict(state, done, ctx)
    if explained is not None:
        done = done.model_copy(update={"explanation": explained[0]})
        out["decisions"] = [explained[1]]
    out["experiments"] = [done]
    out["proposals"] = [*proposals, p]
    out["kb_records"] = [*ids, rec.id, *([system_rec.id] if system_rec else [])]
    if keep:
        out["incumbent"] = exp.candidate
    change = f" ({rec.change_pct:+.1f}%)" if rec.change_pct is not None else ""
    kept_as = (
        " (kept on trial: a person must confirm it)" if verdict == "pending" else " (kept)" if keep else ""
    )
    ctx.progress(
        "kb", f"opt{exp.iteration} {exp.proposal_id}: {verdict}{change}{kept_as} -> KB record {rec.id}"
    )
    out["events"].append(
        log(
            "kb",
            f"opt{exp.iteration}: {verdict}: {rec.verdict_reason}",
            record=rec.id,
            system_record=system_rec.id if system_rec else None,
            kept=keep,
        )
    )
    return update(out)
