"""What a comparison of two measured arms says: each arm's summary, the effect, the evidence.

The statistics that produce them are in ``tools/runner/stats.py``; the models live here so the
state, the knowledge base and the reports read one typed record of every comparison.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

#: The fewest values per arm with which the two-sided Mann-Whitney test can reach p < 0.05 (four
#: per arm: 2/C(8,4) = 0.029; three per arm: 0.1), so the fewest pairs a re-measurement that
#: may show a gain runs.
MIN_DECIDING_PAIRS = 4

#: What the statistics alone say of a candidate against its reference.
StatsVerdict = Literal["win", "no_change", "regression"]


class ArmStats(BaseModel):
    """Summary of one arm (the replicate values of one configuration).

    ``p95`` uses linear interpolation between order statistics (Hyndman & Fan type 7, numpy's
    default ``method="linear"``, Excel's PERCENTILE.INC): with the values sorted ascending as
    ``x[0..n-1]`` and ``h = (n - 1) * 0.95``, ``p95 = x[floor(h)] + (h - floor(h)) *
    (x[floor(h) + 1] - x[floor(h)])``. ``stdev`` is the sample standard deviation (ddof=1;
    0.0 for a single value). ``cv = stdev / |mean|`` (0.0 when stdev is 0, inf when the mean
    is 0 and the values vary).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int
    median: float
    p95: float
    mean: float
    stdev: float
    min: float
    max: float
    cv: float


TestName = Literal["mann_whitney", "signed_rank"]
#: how reports and reasons name each test
TEST_NAMES: dict[str, str] = {"mann_whitney": "Mann-Whitney", "signed_rank": "Wilcoxon signed-rank"}


class Comparison(BaseModel):
    """Result of ``compare``: both arms, the effect, the evidence, and the verdict with its reason."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    baseline: ArmStats
    candidate: ArmStats
    ratio: float
    """median(candidate) / median(baseline)."""
    change_pct: float
    """Signed relative change of the median in percent; positive = better for the metric's direction."""
    ci95: tuple[float, float]
    """Percentile-bootstrap confidence interval of ``ratio`` (at ``confidence``, 0.95 by default)."""
    p_value: float
    """Two-sided p-value of :attr:`test`."""
    #: the test behind ``p_value``: Mann-Whitney U on two samples, or Wilcoxon signed-rank on the
    #: pairs of an interleaved sitting (older records have no field: they were Mann-Whitney)
    test: TestName = "mann_whitney"
    verdict: StatsVerdict
    reason: str
    lower_is_better: bool
    alpha: float
    min_effect: float
    confidence: float


def relative_improvement(before: float, after: float, *, lower_is_better: bool = True) -> float:
    """Signed relative change as a fraction of ``|before|``; positive means better for the metric's
    direction (lower for times, higher for throughputs).  The one definition every verdict uses."""
    delta = (before - after) if lower_is_better else (after - before)
    return delta / abs(before)


def pct_change(before: float | None, after: float | None, *, lower_is_better: bool = True) -> float | None:
    """:func:`relative_improvement` in percent (positive = better); None when a side is unknown or
    ``before`` is 0. The one percent change the verifier, the guards, the KB and the reports show."""
    if before is None or after is None or before == 0:
        return None
    return 100.0 * relative_improvement(before, after, lower_is_better=lower_is_better)
