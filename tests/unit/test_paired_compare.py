"""Comparing an interleaved sitting pair by pair (scripted replicate values): a win a drifting load
hid from the two-arm test is found, a steady drift in counterbalanced order is no win, and the
thresholds are the same."""

from __future__ import annotations

import pytest

from dftune.tools.kb.verdict import decide
from dftune.tools.runner.stats import PAIRED_MIN, compare, signed_rank

#: a real sitting (sample reader, 2 reader threads against 1, load average 9 on 2 cores), pair by pair
LOADED_REF = [0.159, 0.22, 0.174, 0.231, 0.218, 0.238, 0.149, 0.109, 0.116, 0.181]
LOADED_CAND = [0.139, 0.16, 0.126, 0.15, 0.181, 0.15, 0.117, 0.122, 0.133, 0.109]

_WOBBLE = [0.02, -0.03, 0.01, 0.0, -0.01, 0.03, -0.02, 0.015, -0.005, 0.025]


def _drift(i: int) -> float:
    """The metric of the i-th run of a sitting when nothing changes but the machine warms up."""
    return 10.0 - 0.3 * i + _WOBBLE[i % len(_WOBBLE)]


def test_a_win_under_a_drifting_load_is_found_pair_by_pair() -> None:
    apart = compare(LOADED_REF, LOADED_CAND)
    assert apart.verdict == "no_change" and apart.change_pct > 20  # the drift swamped the two-arm test
    paired = compare(LOADED_REF, LOADED_CAND, paired=True)
    assert paired.verdict == "win" and paired.p_value < 0.05, paired.reason
    assert "Wilcoxon signed-rank" in paired.reason and "10 pairs" in paired.reason
    assert paired.test == "signed_rank" and apart.test == "mann_whitney"  # the report names the test
    d = decide(
        [],
        metric="runtime",
        before=paired.baseline.median,
        after=paired.candidate.median,
        lower_is_better=True,
        comparison=paired,
    )
    assert d.verdict == "win"


def test_a_steady_drift_in_counterbalanced_order_is_no_win() -> None:
    """Nothing changed: the runs only got faster. A B, B A, ... spreads the drift over both arms."""
    ref = [_drift(2 * k) if k % 2 == 0 else _drift(2 * k + 1) for k in range(10)]
    cand = [_drift(2 * k + 1) if k % 2 == 0 else _drift(2 * k) for k in range(10)]
    assert compare(ref, cand, paired=True).verdict == "no_change"


def test_the_same_drift_in_one_order_would_be_a_false_win() -> None:
    """Why the sitting alternates the order: A B, A B, ... puts the candidate later in every pair."""
    ref = [_drift(2 * k) for k in range(10)]
    cand = [_drift(2 * k + 1) for k in range(10)]
    assert compare(ref, cand, paired=True).verdict == "win"  # the bias a fixed order would bring


def test_noise_alone_stays_no_change_pair_by_pair() -> None:
    ref = [10, 11, 9, 10.5, 9.5, 10.2, 9.8, 10.9, 9.1, 10.0]
    cand = [10.2, 9.1, 11, 9.6, 10.4, 9.9, 10.8, 9.3, 10.1, 10.6]
    assert compare(ref, cand, paired=True).verdict == "no_change"


def test_below_the_paired_minimum_the_arms_are_compared_apart() -> None:
    ref, cand = LOADED_REF[: PAIRED_MIN - 1], LOADED_CAND[: PAIRED_MIN - 1]
    assert compare(ref, cand, paired=True) == compare(ref, cand)  # 5 pairs cannot reach p < 0.05
    assert signed_rank(ref, cand) >= 0.0625


def test_the_minimum_effect_still_holds() -> None:
    """A consistent 1% gain in every pair is significant and still no win (the 2% minimum)."""
    ref = [10.0, 10.3, 9.8, 10.1, 9.9, 10.2, 10.05, 9.95]
    cand = [x * 0.99 for x in ref]
    c = compare(ref, cand, paired=True)
    assert c.p_value < 0.05 and c.verdict == "no_change" and "below the 2.0% minimum" in c.reason


def test_unequal_arms_are_not_paired() -> None:
    c = compare(LOADED_REF, LOADED_CAND[:-1], paired=True)
    assert "Mann-Whitney" in c.reason


@pytest.mark.parametrize("lower", [True, False])
def test_direction(lower: bool) -> None:
    ref, cand = (
        (LOADED_REF, LOADED_CAND) if lower else ([1 / x for x in LOADED_REF], [1 / x for x in LOADED_CAND])
    )
    assert compare(ref, cand, lower_is_better=lower, paired=True).verdict == "win"
