"""The one verdict: what a measured (or refused) change is, from its guards and its numbers.

The verifier (its progress line and the experiment), the record node and the knowledge base
all call :func:`decide`, so a run and its KB records can never disagree.

Precedence: a guard that rejects (access pattern, doing less) makes the change ``rejected``
whatever else is true; a missing citation makes it ``unsupported``; a tripped
non-degradation guard makes it ``regression``; a guard that cannot tell a legitimate change
from a forbidden one makes it ``inconclusive`` (never kept on its own), or ``pending`` when the
numbers alone say ``win``: a question for a person, kept on trial until they answer (a person's
confirmation turns it into a win, their refusal into ``rejected``); only then do the numbers decide. A ``win``
needs an improvement of at least :data:`WIN_THRESHOLD_PCT` AND evidence beyond the noise (the
runner's statistical comparison said ``win``, or, without one, the two arms' 95% confidence
intervals do not overlap); a smaller or unproven improvement is ``no_change``; worse beyond
the noise is ``regression`` (without any statistical evidence: worse by more than 2%).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

from dftune.core.domain.stats import pct_change
from dftune.core.domain.verdicts import Decided, GuardDecision, Verdict
from dftune.tools.guards import guard_rules

#: a ``win`` is an improvement of at least 5% (and beyond the noise).
WIN_THRESHOLD_PCT = 5.0
_EPS = 1e-9


class StatisticalVerdict(Protocol):
    """What the verdict reads of a comparison (``stats.Comparison`` or the KB's summary of one)."""

    @property
    def verdict(self) -> str: ...

    @property
    def reason(self) -> str | None: ...


def decide(
    decisions: Sequence[GuardDecision],
    *,
    metric: str,
    before: float | None,
    after: float | None,
    lower_is_better: bool,
    comparison: StatisticalVerdict | None = None,
    before_ci: tuple[float, float] | None = None,
    after_ci: tuple[float, float] | None = None,
) -> Decided:
    """The verdict of one change: the guards first, then the numbers (see the module docstring)."""
    change = pct_change(before, after, lower_is_better=lower_is_better)
    triggered = any(d.guard_triggered for d in decisions)
    failed = [d for d in decisions if not d.passed and d.verdict is not None]
    rejecting = [d for d in failed if d.verdict == "rejected"]
    if rejecting:  # forbidden whatever its citations: rejection is the stronger, more useful reason
        why = "; ".join(f"{d.guard}: {d.reason}" for d in rejecting)
        return Decided(verdict="rejected", reason=why, guard_triggered=triggered, change_pct=change)
    unsupported = [d for d in failed if d.verdict == "unsupported"]
    if unsupported:
        why = "; ".join(d.reason for d in unsupported) + "; the change must not be applied"
        return Decided(verdict="unsupported", reason=why, guard_triggered=triggered, change_pct=change)
    tripped = [d for d in decisions if d.guard_triggered or (not d.passed and d.verdict == "regression")]
    if tripped:
        why = "; ".join(f"{d.guard} guard triggered: {d.reason}" for d in tripped)
        return Decided(verdict="regression", reason=why, guard_triggered=True, change_pct=change)
    by_numbers = functools.partial(
        numeric_verdict,
        metric=metric,
        before=before,
        after=after,
        lower_is_better=lower_is_better,
        comparison=comparison,
        before_ci=before_ci,
        after_ci=after_ci,
    )
    unsure = [d for d in failed if d.verdict == "inconclusive"]
    if unsure:  # never kept on its own: the traces cannot tell a legitimate change from a forbidden one
        why = "; ".join(f"{d.guard}: {d.reason}" for d in unsure)
        if change is not None and before is not None and after is not None:
            numbers, said = by_numbers()
            if numbers == "win":  # a win the trace cannot settle is a person's question, never a silent loss
                return Decided(
                    verdict="pending",
                    change_pct=change,
                    reason=f"{why}; waits for a person's confirmation; the numbers: {said}",
                )
            # nothing for a person to settle, but the reason says what the numbers did show
            why = f"{why}; no win to confirm, the numbers: {said}"
        return Decided(verdict="inconclusive", reason=why, change_pct=change)
    verdict, why = by_numbers()
    return Decided(verdict=verdict, reason=why, change_pct=change)


def numeric_verdict(
    *,
    metric: str,
    before: float | None,
    after: float | None,
    lower_is_better: bool,
    comparison: StatisticalVerdict | None = None,
    before_ci: tuple[float, float] | None = None,
    after_ci: tuple[float, float] | None = None,
) -> tuple[Verdict, str]:
    """Verdict of a result every guard let through, from the numbers alone."""
    change = pct_change(before, after, lower_is_better=lower_is_better)
    if change is None or before is None or after is None:
        raise ValueError(
            "a result that passed the guards needs its measurement: before and after "
            "(the two medians) or the runner's comparison"
        )
    moved = f"{metric} {before:g} -> {after:g} ({change:+.2f}%, positive = better)"
    win_text = f"{WIN_THRESHOLD_PCT:g}%"
    if comparison is not None:
        said = f"the statistical comparison says {comparison.verdict}" + (
            f" ({comparison.reason})" if comparison.reason else ""
        )
        if comparison.verdict == "regression":
            return "regression", f"worse beyond the noise: {moved}; {said}"
        if comparison.verdict == "no_change":
            return "no_change", f"within the noise: {moved}; {said}"
        if change >= WIN_THRESHOLD_PCT - _EPS:
            return "win", f"improved by at least {win_text} and beyond the noise: {moved}; {said}"
        return (
            "no_change",
            f"a significant but small improvement: {moved} is below the {win_text} a win needs",
        )
    if before_ci is not None and after_ci is not None:
        (blo, bhi), (alo, ahi) = before_ci, after_ci
        disjoint = bhi < alo or ahi < blo
        cis = f"95% CIs before [{blo:g}, {bhi:g}], after [{alo:g}, {ahi:g}]"
        if not disjoint or change == 0:
            return "no_change", f"within the noise: {moved}; the {cis} overlap"
        if change < 0:
            return "regression", f"worse beyond the noise: {moved}; the {cis} do not overlap"
        if change >= WIN_THRESHOLD_PCT - _EPS:
            return (
                "win",
                f"improved by at least {win_text} and beyond the noise: {moved}; the {cis} do not overlap",
            )
        return "no_change", f"a small improvement: {moved} is below the {win_text} a win needs"
    limit = 100 * guard_rules().app_regression
    if change < -limit - _EPS:
        return "regression", (
            f"worse by more than {limit:g}%: {moved} (no statistical comparison or confidence "
            "intervals were given; a loss this size is treated as a regression)"
        )
    return "no_change", (
        f"{moved}; no statistical comparison or confidence intervals were given, so nothing can be "
        "credited as a win (pass the runner's comparison)"
    )
