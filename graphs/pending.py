"""Changes pending confirmation: a win the traces cannot settle is a question for a person, never a
silent loss.

When a change wins but a measuring guard cannot tell a legitimate change from a forbidden one (the
access-pattern guard's "coalescing or a larger application record?"), an autonomous run keeps it on
the incumbent *on trial* (experiment verdict ``pending``, KB verdict ``pending``) and goes on: every
later experiment is measured on top of it. The person answers in the morning, one item at a time
(``dftune approve RUN_ID [--reject] [--reason TEXT]``, oldest first):

- confirmed: the KB records the win (a record that settles the pending one) and nothing else moves:
  what was measured on top of it stands;
- refused: the KB records the refusal with the person's reason; the incumbent goes back to the arm
  the change was measured against; every experiment measured on top of it since (kept or not, the
  numbers depended on it) is voided, gives its slot of the experiment budget back, and is measured
  again first, without it. So after the answers the best configuration is the one the run would
  have reached had the person answered at once, at the cost of measuring those experiments twice.

The answer enters the graph as a :class:`PendingAnswer` in the state (written as if the record node
had just run), and :func:`settle` applies it: thin, checkpointed and replayable like every node.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from pydantic import TypeAdapter

from dftune.agents.context import Context
from dftune.core.domain.experiments import Experiment, PendingAnswer
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import (
    ApprovalRequest,
    ConfirmRequest,
    Interrupt,
    PatternQuestion,
    PendingItem,
    TuningState,
    Update,
    log,
    merge_by_id,
    merge_experiments,
    update,
)
from dftune.graphs.guard_nodes import record_experiment, revert

#: verdicts that came from the numbers of a sitting (they depend on the incumbent it ran against)
MEASURED = ("win", "no_change", "regression", "pending", "inconclusive")


def pending_item(run_id: str, exp: Experiment, proposal: Proposal) -> ConfirmRequest:
    """One entry of a run JSON's ``pending`` list for a change waiting for confirmation."""
    return ConfirmRequest(
        proposal_id=exp.proposal_id,
        iteration=exp.iteration,
        strategy=exp.strategy,
        settings=dict(proposal.change.settings),
        env=dict(proposal.change.env),
        question=exp.question,
        change_pct=exp.change_pct,
        kb_record=exp.kb_record_id,
        resume_with=f"dftune approve {run_id}  (it is legitimate)  or  --reject --reason TEXT",
    )


def pending_items(state: TuningState, interrupts: list[Any]) -> list[PendingItem]:
    """What waits for a person, in the order ``dftune approve`` answers it: the question the graph is
    stopped at (nothing moves until it is answered; the interrupts' values), then the changes kept
    on trial, oldest first."""
    items: list[PendingItem] = [question(v) for v in interrupts]
    return items + [pending_item(state.run_id, e, state.proposal(e.proposal_id)) for e in state.pending]


_INTERRUPT: TypeAdapter[ApprovalRequest | PatternQuestion] = TypeAdapter(Interrupt)


def question(value: Any) -> ApprovalRequest | PatternQuestion:
    """An interrupt's value as the question it is (a value saved before questions carried their
    kind was an approval request)."""
    if isinstance(value, dict) and "kind" not in value:
        value = {"kind": "approval", **value}
    return _INTERRUPT.validate_python(value)


def answer_for(
    state: TuningState,
    decision: Literal["approve", "reject"],
    reason: str,
    *,
    user: str = "",
    channel: Literal["terminal", "mcp", ""] = "",
) -> PendingAnswer:
    """The answer to the first change on trial (ValueError when none waits)."""
    if not state.pending:
        raise ValueError(f"run {state.run_id} has no change waiting for confirmation")
    first = state.pending[0]
    return PendingAnswer(
        iteration=first.iteration,
        proposal_id=first.proposal_id,
        decision=decision,
        reason=reason,
        user=user,
        channel=channel,
    )


def answer_first(graph: Any, config: Any, state: TuningState, answer: PendingAnswer) -> Any:
    """Hand a person's answer to the oldest change on trial to a stopped run's graph; returns the config
    to stream from (``None`` as input). The answer enters as if the record node had just run, so the
    settle node applies it and choose goes on (a refusal measures again what stood on the change)."""
    out = {"answers": [answer], "status": "running"}
    return graph.update_state(config, out, as_node="record")


def settle(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: apply every answer whose change still waits (a re-run after a crash finds it settled)."""
    ctx = runtime.context
    out: dict[str, Any] = {"experiments": [], "proposals": [], "kb_records": [], "events": []}
    for answer in state.answers:
        exp = next((e for e in state.experiments if e.iteration == answer.iteration), None)
        if exp is None or exp.verdict != "pending" or not exp.kept or exp.proposal_id != answer.proposal_id:
            continue
        step = (
            _confirm(state, ctx, exp, answer)
            if answer.decision == "approve"
            else _refuse(state, ctx, exp, answer)
        )
        for key in ("experiments", "proposals", "kb_records", "events"):
            out[key] += step.get(key, [])
        if "incumbent" in step:
            out["incumbent"] = step["incumbent"]
        state = _applied(state, step)
    return update({k: v for k, v in out.items() if v or k == "incumbent"})


def _applied(state: TuningState, step: dict[str, Any]) -> TuningState:
    """The state with one answer's update (the next answer sees it)."""
    return state.model_copy(
        update={
            "experiments": merge_experiments(state.experiments, step.get("experiments")),
            "proposals": merge_by_id(state.proposals, step.get("proposals")),
            "incumbent": step.get("incumbent", state.incumbent),
        }
    )


def _confirm(state: TuningState, ctx: Context, exp: Experiment, answer: PendingAnswer) -> dict[str, Any]:
    note = answer.reason or "a person"
    done, rec, kb_ids = _record_answer(state, ctx, exp, {"confirmed_by": note})
    won = rec.verdict == "win"
    ctx.progress("kb", f"opt{exp.iteration}: confirmed by a person -> {rec.verdict}, KB record {rec.id}")
    step: dict[str, Any] = {
        "experiments": [done],
        "kb_records": kb_ids,
        "proposals": [state.proposal(exp.proposal_id).model_copy(update={"kb_record_id": rec.id})],
        "events": [
            log(
                "kb",
                f"opt{exp.iteration}: a person confirmed {exp.proposal_id} ({note}): {rec.verdict}",
                record=rec.id,
                settles=exp.kb_record_id,
                user=answer.user,
                channel=answer.channel,
            )
        ],
    }
    if won:
        return step
    # the person's word settled the pattern but the numbers no longer say win: not kept after all
    return _without(state, ctx, done, step)


def _record_answer(
    state: TuningState, ctx: Context, exp: Experiment, answer_fields: dict[str, Any]
) -> tuple[Experiment, Any, list[int]]:
    """Record the person's answer in the KB (a new record that settles the pending one) and return
    the experiment as it now stands, the record, and the KB ids it added."""
    asked = exp.model_copy(update=answer_fields)
    rec, system_rec = record_experiment(state, ctx.workload_spec, ctx, asked, settles=exp.iteration)
    done = asked.model_copy(
        update={
            "verdict": rec.verdict,
            "verdict_reason": rec.verdict_reason,
            "kb_record_id": rec.id,
            "question": "",
        }
    )
    return done, rec, [rec.id, *([system_rec.id] if system_rec else [])]


def _refuse(state: TuningState, ctx: Context, exp: Experiment, answer: PendingAnswer) -> dict[str, Any]:
    why = answer.reason or "a person did not confirm it"
    done, rec, kb_ids = _record_answer(state, ctx, exp, {"refused_by": why})
    ctx.progress("kb", f"opt{exp.iteration}: refused by a person ({why}) -> KB record {rec.id}")
    step: dict[str, Any] = {
        "experiments": [done],
        "kb_records": kb_ids,
        "proposals": [
            state.proposal(exp.proposal_id).model_copy(
                update={"kb_record_id": rec.id, "status": "declined", "reason": f"refused by a person: {why}"}
            )
        ],
        "events": [
            log(
                "kb",
                f"opt{exp.iteration}: a person refused {exp.proposal_id} ({why})",
                record=rec.id,
                settles=exp.kb_record_id,
                user=answer.user,
                channel=answer.channel,
            )
        ],
    }
    return _without(state, ctx, done, step)


def _without(state: TuningState, ctx: Context, exp: Experiment, step: dict[str, Any]) -> dict[str, Any]:
    """Take a change off the incumbent: back to the arm it was measured against; what was measured on
    top of it since is voided and proposed again (first, see choose), without it."""
    revert(ctx, state, exp)
    off = exp.model_copy(update={"kept": False, "reverted": True})
    voided, again = [], []
    for e in state.experiments:
        if e.iteration <= exp.iteration or e.voided_by is not None or e.verdict not in MEASURED:
            continue
        if e.kept:
            revert(ctx, state, e)
        voided.append(e.model_copy(update={"voided_by": exp.iteration, "kept": False}))
        p = state.proposal(e.proposal_id)
        origin = p.retry_of or p.id
        again.append(
            p.model_copy(
                update={
                    "id": f"{origin}@without-opt{exp.iteration}",
                    "status": "proposed",
                    "retry_of": origin,
                    "remeasures": e.iteration,
                    "iteration": None,
                    "kb_record_id": None,
                    "reason": f"measured in opt{e.iteration} on top of "
                    f"opt{exp.iteration}, which a person refused: "
                    "measured again without it",
                }
            )
        )
    step["experiments"] = [off, *voided]
    step["proposals"] = [*step["proposals"], *again]
    step["incumbent"] = exp.reference
    if voided:
        step["events"].append(
            log(
                "optimizer",
                f"{len(voided)} experiment(s) measured on top of opt{exp.iteration} "
                "are measured again without it",
                voided=[e.iteration for e in voided],
            )
        )
        ctx.progress(
            "optimizer", f"measuring again without opt{exp.iteration}: " + ", ".join(p.id for p in again)
        )
    return step
