"""Hand-checkable tests for dftune.tools.runner.stats (honest comparison of benchmark arms)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from dftune.core.domain.stats import ArmStats
from dftune.tools.runner.stats import (
    DEFAULT_REPLICATES,
    MIN_REPLICATES,
    bootstrap_ratio_ci,
    compare,
    mann_whitney,
    regression_guard,
    summarize,
)

# Five replicates around 10 s and around 8 s with +-1% noise: the arms do not overlap.
BASE = [10.0, 10.1, 9.9, 10.05, 9.95]
FAST = [8.0, 8.1, 7.9, 8.05, 7.95]
# Overlapping noisy arms: medians 10.0 and 9.6 (a 4% gain) but the ranges interleave.
NOISY_BASE = [10.0, 9.0, 11.0, 10.5, 9.5]
NOISY_CAND = [9.6, 8.5, 10.8, 10.2, 9.0]


# --------------------------------------------------------------------------- summarize


def test_default_replicates_is_five() -> None:
    assert DEFAULT_REPLICATES == 5
    assert MIN_REPLICATES == 3


def test_summarize_known_list() -> None:
    s = summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert s.n == 10
    assert s.median == 5.5
    # Linear interpolation: h = (10 - 1) * 0.95 = 8.55 -> x[8] + 0.55 * (x[9] - x[8]) = 9 + 0.55.
    assert s.p95 == pytest.approx(9.55, abs=1e-12)
    assert s.mean == 5.5
    assert s.stdev == pytest.approx(math.sqrt(82.5 / 9), abs=1e-12)  # sample stdev, ddof=1
    assert (s.min, s.max) == (1.0, 10.0)
    assert s.cv == pytest.approx(s.stdev / 5.5)


def test_p95_interpolation_on_five_values_unsorted() -> None:
    # Sorted: 10 20 30 40 50; h = 4 * 0.95 = 3.8 -> 40 + 0.8 * 10 = 48.
    assert summarize([50, 10, 40, 20, 30]).p95 == pytest.approx(48.0, abs=1e-12)
    # Two values: h = 0.95 -> 1 + 0.95 * (3 - 1) = 2.9.
    assert summarize([3.0, 1.0]).p95 == pytest.approx(2.9, abs=1e-12)


def test_summarize_single_value() -> None:
    s = summarize([5.0])
    assert (s.n, s.median, s.p95, s.mean, s.stdev, s.min, s.max, s.cv) == (1, 5, 5, 5, 0, 5, 5, 0)


def test_summarize_empty_arm_raises() -> None:
    with pytest.raises(ValueError, match="empty"):
        summarize([])


def test_summarize_rejects_nan() -> None:
    with pytest.raises(ValueError, match="NaN"):
        summarize([1.0, float("nan")])


def test_arm_stats_forbids_extra_fields() -> None:
    fields = summarize([1.0, 2.0]).model_dump()
    with pytest.raises(ValidationError):
        ArmStats(**fields, extra_field=1)


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_is_deterministic_with_seed() -> None:
    assert bootstrap_ratio_ci(NOISY_BASE, NOISY_CAND, seed=7) == bootstrap_ratio_ci(
        NOISY_BASE, NOISY_CAND, seed=7
    )
    # With 5 values the resampled medians are order statistics, so different seeds usually land on
    # the same bounds; longer arms with few resamples show that the seed really drives the draw.
    rng = np.random.default_rng(0)
    base, cand = rng.uniform(9, 11, 41).tolist(), rng.uniform(8, 10, 41).tolist()
    a = bootstrap_ratio_ci(base, cand, resamples=500, seed=7)
    b = bootstrap_ratio_ci(base, cand, resamples=500, seed=7)
    c = bootstrap_ratio_ci(base, cand, resamples=500, seed=8)
    assert a == b
    assert a != c
    assert a[0] < a[1]


def test_bootstrap_identical_constant_arms_is_exactly_one() -> None:
    assert bootstrap_ratio_ci([2.0] * 5, [2.0] * 5) == (1.0, 1.0)


def test_bootstrap_bounds_are_ratios_of_observed_values() -> None:
    # Non-overlapping arms: every resampled median ratio lies in [min(c)/max(b), max(c)/min(b)].
    lo, hi = bootstrap_ratio_ci(BASE, FAST)
    assert 7.9 / 10.1 <= lo < 0.8 < hi <= 8.1 / 9.9


def test_bootstrap_ci_contains_true_ratio() -> None:
    rng = np.random.default_rng(123)
    base = 10.0 * rng.lognormal(0.0, 0.05, size=40)
    cand = 8.0 * rng.lognormal(0.0, 0.05, size=40)  # true ratio of medians: 0.8
    lo, hi = bootstrap_ratio_ci(base.tolist(), cand.tolist())
    assert lo < 0.8 < hi
    assert hi - lo < 0.1


def test_bootstrap_coverage_is_close_to_nominal() -> None:
    rng = np.random.default_rng(2024)
    trials, covered = 100, 0
    for trial in range(trials):
        base = 10.0 * rng.lognormal(0.0, 0.1, size=30)
        cand = 9.0 * rng.lognormal(0.0, 0.1, size=30)  # true ratio 0.9
        lo, hi = bootstrap_ratio_ci(base.tolist(), cand.tolist(), resamples=2000, seed=trial)
        covered += lo <= 0.9 <= hi
    assert covered >= 85  # nominal 95%; the percentile bootstrap of a median undercovers slightly


def test_bootstrap_narrower_at_lower_confidence() -> None:
    lo95, hi95 = bootstrap_ratio_ci(NOISY_BASE, NOISY_CAND, confidence=0.95)
    lo80, hi80 = bootstrap_ratio_ci(NOISY_BASE, NOISY_CAND, confidence=0.80)
    assert lo95 <= lo80 <= hi80 <= hi95


def test_bootstrap_block_drawing_handles_long_arms() -> None:
    # 2000 values x 10_000 resamples is drawn in blocks; the result stays sane and reproducible.
    rng = np.random.default_rng(5)
    base = (10.0 + rng.normal(0, 0.1, 2000)).tolist()
    cand = (5.0 + rng.normal(0, 0.05, 2000)).tolist()
    ci = bootstrap_ratio_ci(base, cand)
    assert ci == bootstrap_ratio_ci(base, cand)
    assert 0.49 < ci[0] < 0.5 < ci[1] < 0.51


@pytest.mark.parametrize(
    ("baseline", "candidate", "kwargs", "match"),
    [
        ([], [1.0], {}, "empty"),
        ([1.0, 0.0], [1.0], {}, "positive"),
        ([1.0], [1.0], {"confidence": 1.0}, "confidence"),
        ([1.0], [1.0], {"resamples": 0}, "resamples"),
    ],
)
def test_bootstrap_rejects_bad_input(
    baseline: list[float], candidate: list[float], kwargs: dict[str, float], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        bootstrap_ratio_ci(baseline, candidate, **kwargs)


# --------------------------------------------------------------------------- Mann-Whitney


def test_mann_whitney_exact_separated_arms() -> None:
    # No overlap, 5 vs 5, no ties: exact two-sided p = 2 / C(10, 5) = 2 / 252.
    assert mann_whitney(BASE, FAST) == pytest.approx(2 / 252)


def test_mann_whitney_three_vs_three_floor() -> None:
    # The smallest possible two-sided p with 3 vs 3 is 2 / C(6, 3) = 0.1.
    assert mann_whitney([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(0.1)


def test_mann_whitney_ties_and_tiny_arms() -> None:
    assert mann_whitney([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]) == 1.0
    assert mann_whitney([1.0], [2.0, 3.0, 4.0]) == 1.0
    p = mann_whitney([1.0, 2.0, 2.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0])  # ties -> asymptotic
    assert 0.0 < p < 0.05


# --------------------------------------------------------------------------- compare


def test_identical_arms_no_change() -> None:
    c = compare(BASE, BASE)
    assert c.verdict == "no_change"
    assert c.ratio == 1.0
    assert c.change_pct == 0.0
    assert c.p_value == 1.0
    assert c.ci95[0] <= 1.0 <= c.ci95[1]
    assert "equal" in c.reason


def test_clearly_faster_candidate_is_win() -> None:
    c = compare(BASE, FAST)
    assert c.verdict == "win"
    assert c.ratio == pytest.approx(0.8)
    assert c.change_pct == pytest.approx(20.0)
    assert c.ci95[1] < 1.0
    assert c.p_value < 0.05
    assert "0.8" in c.reason and "20.0% better" in c.reason
    assert c.baseline.median == 10.0 and c.candidate.median == 8.0


def test_overlapping_noisy_four_percent_gain_is_no_change() -> None:
    c = compare(NOISY_BASE, NOISY_CAND)
    assert c.ratio == pytest.approx(0.96)
    assert c.change_pct == pytest.approx(4.0)
    assert c.verdict == "no_change"  # 4% clears min_effect but is inside the noise
    assert c.ci95[0] < 1.0 < c.ci95[1]
    assert c.p_value >= 0.05
    assert "includes 1.0" in c.reason
    assert "Mann-Whitney" in c.reason


def test_slower_candidate_is_regression() -> None:
    c = compare(FAST, BASE)
    assert c.verdict == "regression"
    assert c.ratio == pytest.approx(1.25)
    assert c.change_pct == pytest.approx(-25.0)
    assert c.ci95[0] > 1.0
    assert "worse" in c.reason


def test_significant_but_tiny_effect_is_no_change() -> None:
    base = [10.0, 10.02, 9.98, 10.01, 9.99]
    cand = [9.9, 9.92, 9.88, 9.91, 9.89]  # 1% faster, perfectly separated
    c = compare(base, cand)
    assert c.p_value < 0.05 and c.ci95[1] < 1.0
    assert c.verdict == "no_change"
    assert "below the 2.0% minimum" in c.reason
    assert compare(base, cand, min_effect=0.005).verdict == "win"


def test_throughput_direction() -> None:
    # Higher is better: 10 -> 8 items/s is a regression, 8 -> 10 a win.
    down = compare(BASE, FAST, lower_is_better=False)
    assert down.verdict == "regression"
    assert down.change_pct == pytest.approx(-20.0)
    assert "higher is better" in down.reason
    up = compare(FAST, BASE, lower_is_better=False)
    assert up.verdict == "win"
    assert up.change_pct == pytest.approx(25.0)
    assert up.ci95[0] > 1.0
    assert compare(NOISY_BASE, NOISY_CAND, lower_is_better=False).verdict == "no_change"


def test_too_few_replicates() -> None:
    c = compare(BASE[:2], FAST)
    assert c.verdict == "no_change"
    assert c.reason.startswith("too few replicates")
    assert compare(BASE, FAST[:1]).reason.startswith("too few replicates")
    # Three per arm is allowed, but the exact Mann-Whitney floor (p = 0.1) keeps it no_change.
    three = compare(BASE[:3], FAST[:3])
    assert three.verdict == "no_change"
    assert "Mann-Whitney p=0.1" in three.reason


def test_compare_empty_arm_raises() -> None:
    with pytest.raises(ValueError, match="empty"):
        compare([], FAST)
    with pytest.raises(ValueError, match="empty"):
        compare(BASE, [])


def test_compare_is_deterministic_and_serializable() -> None:
    a = compare(NOISY_BASE, NOISY_CAND)
    b = compare(NOISY_BASE, NOISY_CAND)
    assert a == b
    assert type(a).model_validate_json(a.model_dump_json()) == a


def test_compare_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="alpha"):
        compare(BASE, FAST, alpha=0.0)
    with pytest.raises(ValueError, match="min_effect"):
        compare(BASE, FAST, min_effect=-0.1)
    with pytest.raises(ValueError, match="positive"):
        compare([1.0, -1.0, 2.0], FAST)


# --------------------------------------------------------------------------- regression guard


def test_regression_guard_lower_is_better() -> None:
    assert regression_guard(100.0, 102.0) is False  # exactly 2% worse: not triggered
    assert regression_guard(10.0, 10.2) is False  # exactly 2% despite float rounding
    assert regression_guard(100.0, 102.1) is True  # 2.1% worse: triggered
    assert regression_guard(10.0, 10.21) is True
    assert regression_guard(100.0, 90.0) is False  # faster: never triggered


def test_regression_guard_higher_is_better() -> None:
    assert regression_guard(100.0, 98.0, lower_is_better=False) is False  # exactly 2% worse
    assert regression_guard(10.0, 9.8, lower_is_better=False) is False
    assert regression_guard(100.0, 97.9, lower_is_better=False) is True  # 2.1% worse
    assert regression_guard(10.0, 9.79, lower_is_better=False) is True
    assert regression_guard(100.0, 150.0, lower_is_better=False) is False


def test_regression_guard_custom_threshold_and_bad_input() -> None:
    assert regression_guard(100.0, 104.0, threshold=0.05) is False
    assert regression_guard(100.0, 106.0, threshold=0.05) is True
    with pytest.raises(ValueError, match="app_before"):
        regression_guard(0.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        regression_guard(float("nan"), 1.0)


def test_bootstrap_median_ci_brackets_the_median_and_is_deterministic() -> None:
    from dftune.tools.runner.stats import bootstrap_median_ci

    values = [10.0, 10.2, 9.9, 10.1, 9.8, 10.05]
    lo, hi = bootstrap_median_ci(values)
    assert lo <= 10.025 <= hi and lo >= min(values) and hi <= max(values)
    assert bootstrap_median_ci(values) == (lo, hi)
    assert bootstrap_median_ci([5.0, 5.0, 5.0]) == (5.0, 5.0)
    with pytest.raises(ValueError):
        bootstrap_median_ci([])
