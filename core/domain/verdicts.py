"""What a change is judged to be: each guard's decision, and the one verdict they and the numbers give.

The guards (tools/guards) and :func:`dftune.tools.kb.verdict.decide` produce these; the state,
the knowledge base and the reports read them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dftune.core.model import StrictModel

GuardName = Literal["citation", "non_degradation", "no_doing_less", "access_pattern"]
#: What a failed guard makes of the change. ``inconclusive``: the trace cannot tell a legitimate
#: change from a forbidden one (e.g. coalescing vs a larger application record without the
#: application's own evidence); such a result is never kept without a person's confirmation.
GuardVerdict = Literal["unsupported", "regression", "rejected", "inconclusive"]
#: The verdict of a measured (or refused) change, in the run and in the knowledge base.
Verdict = Literal[
    "win", "no_change", "regression", "unsupported", "rejected", "inconclusive", "pending", "failed"
]


class GuardDecision(StrictModel):
    """One guard's decision on one change: passed or not, why (with the numbers), and what the
    verdict becomes when it did not pass."""

    guard: GuardName
    passed: bool
    reason: str
    #: what the verdict becomes when the guard fails
    verdict: GuardVerdict | None = None
    #: the dftracer-io-optimization skill's flag for a non-degradation trip (treated like a regression)
    guard_triggered: bool = False
    details: dict[str, Any] = Field(default_factory=dict)


class Decided(BaseModel):
    """The verdict of one change with the sentence that justifies it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict: Verdict
    reason: str
    #: the dftracer-io-optimization skill's flag: the non-degradation
    #: guard tripped (treat exactly like a regression)
    guard_triggered: bool = False
    #: signed change of the metric in percent, positive = better (None without numbers)
    change_pct: float | None = None


def not_run(guard: GuardName, reason: str, **details: Any) -> GuardDecision:
    """A guard that could not run: recorded as such (passed=False, no verdict), never as a pass."""
    return GuardDecision(
        guard=guard,
        passed=False,
        verdict=None,
        reason=f"NOT RUN: {reason}",
        details={"ran": False, **details},
    )
