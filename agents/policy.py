"""Who may say yes to a change: the policy alone, a person, or nobody (a manual recommendation).

One rule for the whole run. ``--mode interactive``: every change waits for a person.
``--mode autonomous`` (overnight): no-sudo L1/L2 changes are approved by the policy; sudo and
L3 changes wait for a person; admin-only changes (and changes dftune cannot apply itself)
are only ever reported. The optimizer reads it to try first what needs nobody; the approval
node reads it to decide whether to interrupt.
"""

from __future__ import annotations

from typing import Literal

from dftune.core.domain.proposals import Proposal

Decision = Literal["approve", "ask", "manual"]


def approval_rule(p: Proposal, mode: str) -> Decision:
    if p.privilege == "admin-only" or p.change.kind == "manual":
        return "manual"
    if mode == "autonomous" and p.privilege == "no-sudo" and p.layer in ("L1", "L2"):
        return "approve"
    if mode == "autonomous" and p.privilege == "no-sudo" and p.change.kind == "stage":
        return "approve"  # a copy per replicate, removed after it: nothing of the system stays changed
    return "ask"
