"""What a guard decides: passed or not, why (with the numbers), and what the verdict becomes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

GuardName = Literal["citation", "non_degradation", "no_doing_less", "access_pattern"]
#: What a failed guard makes of the change. ``inconclusive``: the trace cannot tell a legitimate
#: change from a forbidden one (e.g. coalescing vs a larger application record without the
#: application's own evidence); such a result is never kept without a person's confirmation.
GuardVerdict = Literal["unsupported", "regression", "rejected", "inconclusive"]


class GuardDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    guard: GuardName
    passed: bool
    reason: str
    #: what the verdict becomes when the guard fails
    verdict: GuardVerdict | None = None
    #: the dftracer-io-optimization skill's flag for a non-degradation trip (treated like a regression)
    guard_triggered: bool = False
    details: dict[str, Any] = Field(default_factory=dict)


def not_run(guard: GuardName, reason: str, **details: Any) -> GuardDecision:
    """A guard that could not run: recorded as such (passed=False, no verdict), never as a pass."""
    return GuardDecision(
        guard=guard,
        passed=False,
        verdict=None,
        reason=f"NOT RUN: {reason}",
        details={"ran": False, **details},
    )
