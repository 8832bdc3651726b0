"""The next experiment: every checklist category judged, then the reasoner's pick among what is open."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.optimizer.checklist import checklist_verdicts
from dftune.agents.optimizer.facts import facts_of
from dftune.agents.policy import approval_rule
from dftune.agents.state import TuningState, log

#: Kinds of change dftune applies and measures by itself.
ACTIONABLE = ("knob", "env", "command", "patch")


def choose(state: TuningState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Node: checklist verdicts, then the next proposal (or none: the run is finished)."""
    ctx = runtime.context
    checklist = checklist_verdicts(state)
    update: dict[str, Any] = {"checklist": checklist, "current": None}
    ran = len(state.experiments)
    open_ = [p for p in state.proposals if p.status == "proposed" and p.change.kind in ACTIONABLE]
    if not open_:
        return {**update, "events": [log("optimizer", "no open proposal left")]}
    if ran >= state.max_experiments:
        return {**update, "status_reason": f"experiment budget of {state.max_experiments} used; "
                                           f"{len(open_)} proposal(s) left untried",
                "events": [log("optimizer", f"budget of {state.max_experiments} experiment(s) used")]}  # fmt: skip
    # Overnight, try everything the policy may approve alone before anything that must ask a person.
    alone = [p for p in open_ if approval_rule(p, state.mode) == "approve"]
    judged = ctx.reasoner.choose_next(alone or open_, facts_of(state))
    choice, decided = judged.answer, judged.decision
    ctx.progress("optimizer", f"next: {choice.proposal_id} ({choice.reason})"
                 + (f" [rules: {decided.fallback}]" if decided.fallback else ""))  # fmt: skip
    return {**update, "current": choice.proposal_id, "decisions": [decided],
            "events": [log("optimizer", f"chose {choice.proposal_id}", reason=choice.reason,
                           reasoner=decided.by, fallback=decided.fallback)]}  # fmt: skip
