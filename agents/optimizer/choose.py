"""The next experiment: fresh estimates, every checklist category judged, then the pick.

Before every choice the open proposals are estimated again from the incumbent's trace (what a
change would start from), earlier no-gain proposals that may interact with a change just kept
come back (``search.reopened``; with nothing else open, every earlier no-gain proposal does:
``search.spare_retries``), and knob values beyond their frontier wait (``search.searchable``); the
reasoner then picks among what may be tried now.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.optimizer.checklist import checklist_verdicts
from dftune.agents.optimizer.expand import enabled
from dftune.agents.optimizer.facts import facts_of
from dftune.agents.optimizer.impact import judged, renewed, trace_facts
from dftune.agents.optimizer.search import (
    breadth_first,
    cheaper_layers_first,
    reopened,
    searchable,
    spare_retries,
    winning_levers_first,
)
from dftune.agents.policy import approval_rule
from dftune.agents.reasoner import Judgment
from dftune.agents.reasoner.protocol import Pace
from dftune.agents.reasoner.questions import pace_question
from dftune.core.domain.run import TuningState, Update, log, merge_by_id, update

#: Kinds of change dftune applies and measures by itself.
ACTIONABLE = ("knob", "env", "command", "patch", "stage")


#: the most replicates per arm the model may ask for, as a multiple of the run's count
MAX_REPLICATES_FACTOR = 2


def pace(state: TuningState, ctx: Context) -> Judgment[Pace] | None:
    """Go on, stop, or more replicates: asked of a model only (the rules go on with the run's count).
    Bounded: at most twice the run's replicates, and none extra under a wall-clock budget (its check
    before each arm uses the measured cost of the count it was given)."""
    if not enabled(ctx, "pace"):
        return None
    if sum(d.question == "pace" for d in state.decisions) >= len(state.experiments):
        return None  # asked once per measured experiment (not again after a decline or on resume)
    base = state.replicates or ctx.workload_spec.replicates
    most = base if ctx.budget is not None else base * MAX_REPLICATES_FACTOR
    left = ctx.budget.deadline.left() if ctx.budget is not None and ctx.budget.deadline is not None else None
    facts = facts_of(state, spec=ctx.workload_spec, wall_clock_left_s=left)
    return ctx.reasoner.decide(pace_question(facts, base, most), facts)


def choose(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: checklist verdicts, then the next proposal (or none: the run is finished)."""
    ctx = runtime.context
    back = reopened(state)
    # an experiment voided by a person's refusal of the change it stood on gives its slot back
    ran = sum(e.voided_by is None for e in state.experiments)
    idle = not any(p.status == "proposed" and p.change.kind in ACTIONABLE for p in [*state.proposals, *back])
    if idle and ran < state.max_experiments:
        back += spare_retries(state)
    for p in back:
        ctx.progress("optimizer", f"{p.retry_of} gets another experiment: {p.reason}")
    pending = [p for p in [*state.proposals, *back] if p.status in ("proposed", "known")]
    fresh, _ = renewed(pending, state, ctx, ask=False)
    state = state.model_copy(update={"proposals": merge_by_id(state.proposals, fresh)})
    checklist = checklist_verdicts(state)
    out: dict[str, Any] = {"checklist": checklist, "current": None, "proposals": fresh}
    open_ = [p for p in state.proposals if p.status == "proposed" and p.change.kind in ACTIONABLE]
    if not open_:
        return update(out, events=[log("optimizer", "no open proposal left")])
    if ran >= state.max_experiments:
        return update(
            out,
            status_reason=f"experiment budget of {state.max_experiments} used; "
            f"{len(open_)} proposal(s) left untried",
            events=[log("optimizer", f"budget of {state.max_experiments} experiment(s) used")],
        )
    late = (
        ctx.budget.refuse_next(ctx.workspace.run_dir(state.run_id), "the next experiment")
        if ctx.budget
        else None
    )
    if late:  # the wall-clock budget: nothing starts that its measured cost says cannot finish in time
        ctx.progress("optimizer", late)
        return update(
            out,
            status_reason=f"{late}; {len(open_)} proposal(s) left untried",
            events=[log("optimizer", late, untried=[p.id for p in open_])],
        )
    # measured on top of a change a person refused: measured again first, in their order, before anything new
    again = sorted((p for p in open_ if p.remeasures is not None), key=lambda p: p.remeasures or 0)
    if again:
        why = f"measured again without the change a person refused ({again[0].reason})"
        ctx.progress("optimizer", f"next: {again[0].id} ({why})")
        return update(out, current=again[0].id, events=[log("optimizer", f"chose {again[0].id}", reason=why)])
    decisions = []
    if state.experiments and state.experiments[-1].kept:  # the model's estimates predate the kept change
        asked, d = judged(fresh, state, ctx, trace_facts(state.incumbent, state.fs_type))
        if d is not None:
            fresh, decisions = asked, [d]
            state = state.model_copy(update={"proposals": merge_by_id(state.proposals, fresh)})
            out["proposals"] = fresh
            open_ = [p for p in state.proposals if p.status == "proposed" and p.change.kind in ACTIONABLE]
    paced = pace(state, ctx) if ran else None
    if paced is not None:
        decisions.append(paced.decision)
        if paced.answer.action == "stop":
            why = f"the model stopped the run: {paced.answer.reason[:300]}"
            ctx.progress("optimizer", why)
            return update(
                out,
                status_reason=f"{why}; {len(open_)} proposal(s) left untried",
                decisions=decisions,
                events=[log("optimizer", why, untried=[p.id for p in open_], reasoner=paced.decision.by)],
            )
        out["next_replicates"] = paced.answer.replicates
    now = searchable(open_, state, ctx.workload_spec)
    waiting = len(open_) - len(now)
    if not now:  # every value left lies beyond a direction a regression or a refusal closed
        why = f"the search closed every direction: {waiting} proposal(s) beyond a worse value left untried"
        return update(out, status_reason=why, events=[log("optimizer", why, untried=[p.id for p in open_])])
    # Overnight, try everything the policy may approve alone before anything that must ask a person;
    # among those, an untried knob before another value of a measured one, a knob that won before
    # one that lost, and the workload's own settings before the system's
    alone = [p for p in now if approval_rule(p, state.mode) == "approve"]
    options = cheaper_layers_first(winning_levers_first(breadth_first(alone or now, state), state))
    chosen = ctx.reasoner.choose_next(options, facts_of(state, spec=ctx.workload_spec))
    choice, decided = chosen.answer, chosen.decision
    ctx.progress(
        "optimizer",
        f"next: {choice.proposal_id} ({choice.reason})"
        + (f" [rules: {decided.fallback}]" if decided.fallback else ""),
    )
    return update(
        out,
        current=choice.proposal_id,
        decisions=[*decisions, decided],
        events=[
            log(
                "optimizer",
                f"chose {choice.proposal_id}",
                reason=choice.reason,
                waiting=waiting,
                reopened=[p.id for p in back],
                reasoner=decided.by,
                fallback=decided.fallback,
            )
        ],
    )
