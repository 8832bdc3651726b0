"""Impact estimates, asked only after the guards screened the proposals.

The trace models and the KB give every screened proposal its number first
(:mod:`.impact`); the reasoner (and a model behind it) then sees only what may still be applied
or recommended, so no tokens go to a strategy a guard refused, and no refused proposal carries
a model's number.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.optimizer.impact import renewed
from dftune.core.domain.run import TuningState, Update, log, update

#: statuses the screen lets through: still to measure, or a cited recommendation
SCREENED = ("proposed", "manual")


def estimate(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: a labeled impact estimate for every screened proposal, and the decision that gave them."""
    ctx = runtime.context
    screened = [p for p in state.proposals if p.status in SCREENED]
    if not screened:
        return update(events=[log("optimizer", "no screened proposal to estimate")])
    updated, decisions = renewed(screened, state, ctx, ask=True)
    known = [p.id for p in updated if p.status == "known"]
    if known:
        ctx.progress(
            "optimizer",
            f"{len(known)} change(s) the knowledge base already measured here without a "
            "gain: not tried again (--retry-known)",
        )
    for d in decisions:
        if d.fallback:
            ctx.progress("optimizer", f"impact estimates by the rules ({d.fallback})")
    return update(
        proposals=updated,
        decisions=decisions,
        events=[
            log(
                "optimizer",
                f"estimated the impact of {len(updated)} screened proposal(s)",
                sources=sorted({p.app_impact_source for p in updated}),
                known=known,
                reasoner=decisions[0].by if decisions else "rules",
                fallback=decisions[0].fallback if decisions else None,
            )
        ],
    )
