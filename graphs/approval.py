"""The approval node: approve by the run's one rule (agents.policy), or wait for a person.

The node has no side effect before the interrupt, so a resumed node never repeats one:
applying happens in the next node, after the answer.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from dftune.agents.context import Context
from dftune.agents.policy import approval_rule
from dftune.agents.state import Approval, Proposal, TuningState, log


def request(p: Proposal, run_id: str) -> dict[str, Any]:
    """What the person sees at the interrupt (and ``dftune run --json`` prints as ``pending``)."""
    return {
        "run_id": run_id, "proposal_id": p.id, "strategy": p.strategy, "layer": p.layer,
        "privilege": p.privilege, "description": p.description, "change": p.change.model_dump(),
        "app_impact_pct": p.app_impact_pct, "app_impact_source": p.app_impact_source,
        "citation": p.citation.reference() if p.citation else None,
        "resume_with": f"dftune approve {run_id}  (or --reject)",
    }  # fmt: skip


def approval(state: TuningState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Node: approve by policy, or interrupt and wait for ``dftune approve RUN_ID [--reject]``."""
    assert state.current is not None
    p = state.proposal(state.current)
    decision = approval_rule(p, state.mode)
    if decision == "manual":
        why = "admin-only: reported as a manual recommendation, never applied by dftune"
        return {"proposals": [p.model_copy(update={"status": "manual", "reason": why})], "current": None,
                "approvals": [Approval(proposal_id=p.id, approved=False, by="policy", reason=why)],
                "events": [log("approval", f"{p.id}: {why}")]}  # fmt: skip
    if decision == "approve":
        why = f"autonomous mode: a no-sudo {p.layer} change"
        return {"approvals": [Approval(proposal_id=p.id, approved=True, by="policy", reason=why)],
                "events": [log("approval", f"{p.id} approved by policy ({why})")]}  # fmt: skip
    runtime.context.progress("approval", f"waiting for a person: dftune approve {state.run_id} [--reject]")
    answer = interrupt(request(p, state.run_id))
    approved = bool(answer.get("approved")) if isinstance(answer, dict) else bool(answer)
    who_said = str(answer.get("reason", "")) if isinstance(answer, dict) else ""
    entry = Approval(proposal_id=p.id, approved=approved, by="person",
                     reason=who_said or ("approved" if approved else "rejected"))  # fmt: skip
    if approved:
        return {"approvals": [entry], "events": [log("approval", f"{p.id} approved by a person")]}
    return {"approvals": [entry], "current": None,
            "proposals": [p.model_copy(update={"status": "declined", "reason": f"rejected at approval: {entry.reason}"})],
            "events": [log("approval", f"{p.id} rejected by a person")]}  # fmt: skip
