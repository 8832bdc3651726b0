"""The non-degradation guard: a system-level win that costs the application over 2% is a regression."""

from __future__ import annotations

from typing import Literal

from dftune.core.domain.stats import pct_change
from dftune.core.domain.verdicts import GuardDecision
from dftune.tools.guards.rules import guard_rules
from dftune.tools.runner.stats import regression_guard


def non_degradation_guard(
    *,
    metric_scope: Literal["app", "system"],
    app_before: float | None,
    app_after: float | None,
    lower_is_better: bool = True,
    app_verdict: str | None = None,
) -> GuardDecision:
    """A system-level win that costs the application more than 2% is a regression.

    ``app_verdict``: the paired comparison of the application metric. A median more than 2% worse
    that the comparison finds inside the noise (``no_change``) is no measured cost: the guard
    passes and says so (the p-value decides whether the application paid, not one median)."""
    if metric_scope == "app":
        return GuardDecision(
            guard="non_degradation",
            passed=True,
            reason="app-scoped result: the application metric itself was compared",
        )
    if app_before is None or app_after is None:
        return GuardDecision(
            guard="non_degradation",
            passed=False,
            verdict="rejected",
            reason="a system-scoped result needs the paired app metric (app_before and app_after) "
            "for the same change",
        )
    gain = pct_change(app_before, app_after, lower_is_better=lower_is_better) or 0.0
    details = {"app_before": app_before, "app_after": app_after, "app_change_pct": round(gain, 4)}
    over = regression_guard(
        app_before, app_after, lower_is_better=lower_is_better, threshold=guard_rules().app_regression
    )
    if over and app_verdict == "no_change":
        return GuardDecision(
            guard="non_degradation",
            passed=True,
            details=details,
            reason=f"the application's median moved {gain:+.2f}% ({app_before:g} -> {app_after:g}), "
            "inside the noise: the paired comparison says no_change, so it paid nothing measurable",
        )
    if over:
        return GuardDecision(
            guard="non_degradation",
            passed=False,
            verdict="regression",
            guard_triggered=True,
            details=details,
            reason=f"the application got {-gain:.2f}% worse ({app_before:g} -> {app_after:g}), over the "
            f"{guard_rules().app_regression:.0%} "
            "limit: whatever it did to the system metric, a change that costs the application this much is "
            "not a win; revert it",
        )
    if gain >= 0:
        said = f"the application metric improved by {gain:.2f}% ({app_before:g} -> {app_after:g})"
    else:
        said = (
            f"the application got {-gain:.2f}% worse ({app_before:g} -> {app_after:g}), within the "
            f"{guard_rules().app_regression:.0%} limit"
        )
    return GuardDecision(guard="non_degradation", passed=True, details=details, reason=said)
