"""The next experiment: fresh estimates, every checklist category judged, then the pick.

Before every choice the open proposals are estimated again from the incumbent's trace (what a
change would start from), earlier no-gain proposals that may interact with a change just kept
come back (``search.reopened``), and knob values beyond their frontier wait
(``search.searchable``); the reasoner then picks among what may be tried now.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.optimizer.checklist import checklist_verdicts
from dftune.agents.optimizer.facts import facts_of
from dftune.agents.optimizer.impact import estimate_proposals, trace_facts
from dftune.agents.optimizer.search import reopened, searchable
from dftune.agents.policy import approval_rule
from dftune.agents.state import TuningState, log, merge_by_id

#: Kinds of change dftune applies and measures by itself.
ACTIONABLE = ("knob", "env", "command", "patch")


def choose(state: TuningState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Node: checklist verdicts, then the next proposal (or none: the run is finished)."""
    ctx = runtime.context
    back = reopened(state)
    for p in back:
        ctx.progress("optimizer", f"{p.retry_of} gets another experiment: {p.reason}")
    pending = [p for p in [*state.proposals, *back] if p.status in ("proposed", "known")]
    fresh = estimate_proposals(pending, state, ctx, trace_facts(state.incumbent, state.fs_type))
    state = replace(state, proposals=merge_by_id(state.proposals, fresh))
    checklist = checklist_verdicts(state)
    update: dict[str, Any] = {"checklist": checklist, "current": None, "proposals": fresh}
    ran = len(state.experiments)
    open_ = [p for p in state.proposals if p.status == "proposed" and p.change.kind in ACTIONABLE]
    if not open_:
        return {**update, "events": [log("optimizer", "no open proposal left")]}
    now = searchable(open_, state, ctx.workload_spec)
    waiting = len(open_) - len(now)
    if ran >= state.max_experiments:
        return {**update, "status_reason": f"experiment budget of {state.max_experiments} used; "
                                           f"{len(open_)} proposal(s) left untried",
                "events": [log("optimizer", f"budget of {state.max_experiments} experiment(s) used")]}  # fmt: skip
    # Overnight, try everything the policy may approve alone before anything that must ask a person.
    alone = [p for p in now if approval_rule(p, state.mode) == "approve"]
    choice = ctx.reasoner.choose_next(alone or now, facts_of(state))
    ctx.progress("optimizer", f"next: {choice.proposal_id} ({choice.reason})")
    return {**update, "current": choice.proposal_id,
            "events": [log("optimizer", f"chose {choice.proposal_id}", reason=choice.reason, waiting=waiting,
                           reopened=[p.id for p in back], reasoner=getattr(ctx.reasoner, "name", "?"))]}  # fmt: skip
