"""An undecided comparison (no_change whose CI still reaches a win) gets more replicates; a settled
one does not; and the extension never loosens the verdict (scripted replicate values)."""

from __future__ import annotations

from dftune.tools.runner.stats import compare, undecided

#: a real ~5% win under a drifting load: the incumbent's replicates spread by 30%
DRIFTING_REF = [0.30, 0.36, 0.29, 0.38, 0.31]
DRIFTING_CAND = [0.30, 0.27, 0.33, 0.29, 0.295]


def test_a_win_the_noise_hid_below_the_win_threshold_is_undecided() -> None:
    c = compare(DRIFTING_REF, DRIFTING_CAND)
    assert c.verdict == "no_change" and c.change_pct < 5.0  # the old rule (|change| >= 5%) stopped here
    assert c.ci95[0] < 0.95  # the CI still reaches a 5% improvement
    assert undecided(DRIFTING_REF, DRIFTING_CAND, win_pct=5.0)


def test_a_tight_null_is_decided() -> None:
    ref, cand = [10, 10.1, 9.9, 10.05, 9.95], [9.95, 10.0, 10.05, 9.9, 10.02]
    assert not undecided(ref, cand, win_pct=5.0)  # the CI lies within 1.5%: no 5% win is possible


def test_a_clear_win_or_regression_is_decided() -> None:
    ref, cand = [10, 10.4, 9.8, 10.1, 9.9], [5, 5.2, 4.9, 5.1, 5.05]
    assert compare(ref, cand).verdict == "win" and not undecided(ref, cand)
    assert compare(cand, ref).verdict == "regression" and not undecided(cand, ref)


def test_higher_is_better_reads_the_upper_end() -> None:
    ref = [1 / x for x in DRIFTING_REF]
    cand = [1 / x for x in DRIFTING_CAND]
    assert undecided(ref, cand, lower_is_better=False)
    tight_ref, tight_cand = [100, 101, 99, 100.5, 99.5], [100.2, 99.1, 100.9, 99.6, 100.4]
    assert not undecided(tight_ref, tight_cand, lower_is_better=False)


def test_too_few_replicates_are_not_extended_here() -> None:
    assert not undecided([1.0, 2.0], [0.5, 0.6])  # the sitting's own minimum comes first


def test_more_replicates_decide_with_the_same_test() -> None:
    """Ten pairs of the same drifting win: the same compare (alpha, CI, 2% minimum) now says win;
    ten pairs of noise alone stay no_change (the extension keeps noise out)."""
    ref = [*DRIFTING_REF, 0.33, 0.37, 0.3, 0.35, 0.32]
    cand = [*DRIFTING_CAND, 0.28, 0.3, 0.29, 0.31, 0.285]
    assert compare(ref, cand).verdict == "win"
    noise_ref = [10, 11, 9, 10.5, 9.5, 10.2, 9.8, 10.9, 9.1, 10.0]
    noise_cand = [10.2, 9.1, 11, 9.6, 10.4, 9.9, 10.8, 9.3, 10.1, 10.6]
    assert compare(noise_ref, noise_cand).verdict == "no_change"
