"""Impact estimates, asked only after the guards screened the proposals.

The reasoner (and a model behind it) sees only what may still be applied or recommended, so no
tokens go to a strategy a guard refused, and no refused proposal carries a model's number.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.optimizer.facts import facts_of
from dftune.agents.state import TuningState, log

#: statuses the screen lets through: still to measure, or a cited recommendation
SCREENED = ("proposed", "manual")


def estimate(state: TuningState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Node: a labeled impact estimate for every screened proposal, and the decision that gave them."""
    ctx = runtime.context
    screened = [p for p in state.proposals if p.status in SCREENED]
    if not screened:
        return {"events": [log("optimizer", "no screened proposal to estimate")]}
    judged = ctx.reasoner.estimate_impacts(screened, facts_of(state))
    d = judged.decision
    by = d.reasoner if d.decided_by == "model" else "rules"
    estimates = {e.proposal_id: e for e in judged.answer}
    updated = [p.model_copy(update={"app_impact_pct": e.app_impact_pct, "impact_reason": e.reason,
                                    "impact_estimated_by": by})
               for p in screened if (e := estimates.get(p.id)) is not None]  # fmt: skip
    if d.fallback:
        ctx.progress("optimizer", f"impact estimates by the rules ({d.fallback})")
    return {"proposals": updated, "decisions": [d],
            "events": [log("optimizer", f"estimated the impact of {len(updated)} screened proposal(s)",
                           reasoner=d.by, fallback=d.fallback)]}  # fmt: skip
