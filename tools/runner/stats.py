"""Honest comparison of benchmark arms: per-arm summaries, a bootstrap CI, a rank test, a verdict.

Every function here is pure and deterministic (the bootstrap takes an explicit seed), so a
verdict recorded in the knowledge base can be recomputed from the raw replicate values.

Rules (the dftracer-io-optimization skill's statistics and its non-degradation guard):

- ``compare`` reports ``win`` or ``regression`` only when three independent checks agree:
  the bootstrap confidence interval of the median ratio lies entirely on one side of 1.0,
  the two-sided Mann-Whitney U test gives ``p < alpha``, and the relative change of the
  medians is at least ``min_effect`` (2% by default). Anything else is ``no_change``: a
  difference inside the noise is never a win.
- Fewer than ``MIN_REPLICATES`` values in either arm is ``no_change`` ("too few
  replicates"). The default is ``DEFAULT_REPLICATES`` = 5, as the dftracer-io-optimization
  skill requires. Note that
  with 3 replicates per arm the smallest exact two-sided Mann-Whitney p-value is 0.1, so at
  ``alpha=0.05`` a win needs at least 4 replicates per arm; 5 gives a floor of about 0.008.
- ``regression_guard`` is the dftracer-io-optimization skill's non-degradation guard: a
  paired app metric that got
  worse by more than 2% forces the verdict to regression.

Ratios are ``candidate / baseline`` and need strictly positive values (times, bandwidths,
throughputs). ``change_pct`` is signed so that positive always means better for the user's
direction (``lower_is_better=True`` for times, ``False`` for throughput).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from dftune.core.domain.stats import (
    TEST_NAMES,
    ArmStats,
    Comparison,
    StatsVerdict,
    TestName,
    relative_improvement,
)

DEFAULT_REPLICATES = 5
"""Replicates per arm, as the dftracer-io-optimization skill requires."""

MIN_REPLICATES = 3
"""Below this many values in either arm, ``compare`` refuses to call anything but no_change."""

PAIRED_MIN = 6
"""Pairs from which ``compare(..., paired=True)`` reads the pairing: the exact two-sided Wilcoxon
signed-rank test cannot go below p = 2/2^n, 0.0625 at 5 pairs, so fewer pairs are compared as two
independent arms. The choice depends on the count alone, never on the values."""

DEFAULT_RESAMPLES = 10_000
# Upper bound on the number of index cells drawn at once by the bootstrap (bounds memory).
_BOOTSTRAP_BLOCK_CELLS = 2_000_000
# Absolute slack for threshold comparisons, so that e.g. 10.0 -> 10.2 counts as exactly 2%.
_EPS = 1e-9

# --------------------------------------------------------------------------- helpers


def _as_array(values: Sequence[float], name: str) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of numbers, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: an arm needs at least one measured value")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values: {arr.tolist()}")
    return arr


def _positive(values: Sequence[float], name: str) -> NDArray[np.float64]:
    arr = _as_array(values, name)
    if np.any(arr <= 0):
        raise ValueError(
            f"{name} must hold strictly positive values for a ratio of medians "
            f"(times, bandwidths, throughputs), got min {float(arr.min()):.6g}"
        )
    return arr


def _check_fraction(value: float, name: str) -> None:
    if not (0.0 < value < 1.0):
        raise ValueError(f"{name} must be strictly between 0 and 1, got {value}")


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _pct(x: float) -> str:
    return f"{x:.1f}%"


# --------------------------------------------------------------------------- public API


def summarize(values: Sequence[float]) -> ArmStats:
    """Summarize one arm: n, median, p95 (linear interpolation), mean, stdev, min, max, cv.

    Raises ValueError on an empty arm or on NaN/infinite values.
    """
    arr = _as_array(values, "arm")
    n = int(arr.size)
    mean = float(arr.mean())
    stdev = float(arr.std(ddof=1)) if n > 1 else 0.0
    if stdev == 0.0:
        cv = 0.0
    elif mean == 0.0:
        cv = math.inf
    else:
        cv = stdev / abs(mean)
    return ArmStats(
        n=n,
        median=float(np.median(arr)),
        p95=float(np.quantile(arr, 0.95, method="linear")),
        mean=mean,
        stdev=stdev,
        min=float(arr.min()),
        max=float(arr.max()),
        cv=cv,
    )


def bootstrap_ratio_ci(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of ``median(candidate) / median(baseline)``.

    Each arm is resampled with replacement independently (the arms are unpaired), the ratio of
    the resampled medians is taken ``resamples`` times, and the interval is the
    ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles (linear interpolation) of
    those ratios. Vectorized with numpy; the same inputs and ``seed`` always give the same
    interval. Values must be strictly positive.
    """
    base = _positive(baseline, "baseline")
    cand = _positive(candidate, "candidate")
    _check_fraction(confidence, "confidence")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")

    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples, dtype=np.float64)
    # Draw in row blocks so memory stays bounded for long arms; the block size depends only on
    # the inputs, so the result is still a pure function of (values, confidence, resamples, seed).
    block = max(1, _BOOTSTRAP_BLOCK_CELLS // max(base.size, cand.size))
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        base_idx = rng.integers(0, base.size, size=(rows, base.size))
        cand_idx = rng.integers(0, cand.size, size=(rows, cand.size))
        base_med = np.median(base[base_idx], axis=1)
        cand_med = np.median(cand[cand_idx], axis=1)
        ratios[start : start + rows] = cand_med / base_med

    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail], method="linear")
    return float(lo), float(hi)


def bootstrap_median_ci(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of one arm's median (what ``dftune bench`` reports)."""
    arr = _as_array(values, "values")
    _check_fraction(confidence, "confidence")
    rng = np.random.default_rng(seed)
    medians = np.empty(resamples, dtype=np.float64)
    block = max(1, _BOOTSTRAP_BLOCK_CELLS // arr.size)
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        medians[start : start + rows] = np.median(
            arr[rng.integers(0, arr.size, size=(rows, arr.size))], axis=1
        )
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(medians, [tail, 1.0 - tail], method="linear")
    return float(lo), float(hi)


def mann_whitney(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (``scipy.stats.mannwhitneyu``, method "auto").

    scipy uses the exact distribution for small tie-free samples and the tie-corrected normal
    approximation otherwise. An arm with fewer than 2 values carries no information about
    spread, so the result is 1.0 (no evidence of a difference); the same holds when every value
    is tied and scipy cannot produce a finite p-value.
    """
    base = _as_array(baseline, "baseline")
    cand = _as_array(candidate, "candidate")
    if base.size < 2 or cand.size < 2:
        return 1.0
    from scipy.stats import mannwhitneyu  # scipy.stats takes ~1 s to import: only when comparing

    result = mannwhitneyu(base, cand, alternative="two-sided", method="auto")
    p = float(result.pvalue)
    if not math.isfinite(p):
        return 1.0
    return min(1.0, max(0.0, p))


def compare(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    lower_is_better: bool = True,
    alpha: float = 0.05,
    min_effect: float = 0.02,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    paired: bool = False,
) -> Comparison:
    """Compare a candidate arm against a baseline arm and give an honest verdict.

    ``win`` needs ALL of: the bootstrap CI of the median ratio entirely on the better side of
    1.0, Mann-Whitney ``p < alpha``, and ``|ratio - 1| >= min_effect`` with the median on the
    better side. ``regression`` is the mirror image on the worse side. Everything else is
    ``no_change`` and ``reason`` names each check that failed. Fewer than ``MIN_REPLICATES``
    values in either arm is ``no_change`` with reason "too few replicates ...".

    ``paired``: ``baseline[k]`` and ``candidate[k]`` were measured side by side (an interleaved
    sitting in counterbalanced order). From :data:`PAIRED_MIN` pairs on, the CI is the paired
    bootstrap's and the test the Wilcoxon signed-rank test on the pairs' log ratios, so a drift
    of the machine that moved both arms is not mistaken for noise; the thresholds are the same.
    """
    _check_fraction(alpha, "alpha")
    _check_fraction(confidence, "confidence")
    if not (min_effect >= 0.0 and math.isfinite(min_effect)):
        raise ValueError(f"min_effect must be a finite fraction >= 0, got {min_effect}")

    base_stats = summarize(baseline)
    cand_stats = summarize(candidate)
    _positive(baseline, "baseline")
    _positive(candidate, "candidate")

    ratio = cand_stats.median / base_stats.median
    change = relative_improvement(base_stats.median, cand_stats.median, lower_is_better=lower_is_better)
    change_pct = 100.0 * change
    use_pairs = paired and len(baseline) == len(candidate) and len(baseline) >= PAIRED_MIN
    ci = paired_bootstrap_ratio_ci if use_pairs else bootstrap_ratio_ci
    lo, hi = ci(baseline, candidate, confidence=confidence, resamples=resamples, seed=seed)
    p_value = signed_rank(baseline, candidate) if use_pairs else mann_whitney(baseline, candidate)

    conf_label = f"{confidence * 100:g}%"
    direction = "better" if change > 0 else "worse" if change < 0 else "unchanged"
    sense = "lower" if lower_is_better else "higher"
    effect_text = "unchanged" if change == 0 else f"{_pct(abs(change_pct))} {direction}, {sense} is better"
    headline = (
        f"candidate median {_fmt(cand_stats.median)} vs baseline {_fmt(base_stats.median)} "
        f"(ratio {_fmt(ratio)}, {effect_text})"
    )
    pairs_text = f" over {len(baseline)} pairs" if use_pairs else ""
    ci_text = f"the {conf_label}{' paired' if use_pairs else ''} CI of the ratio [{_fmt(lo)}, {_fmt(hi)}]"
    test: TestName = "signed_rank" if use_pairs else "mann_whitney"
    p_text = f"{TEST_NAMES[test]} p={_fmt(p_value)}{pairs_text}"

    def result(verdict: StatsVerdict, reason: str) -> Comparison:
        return Comparison(
            baseline=base_stats,
            candidate=cand_stats,
            ratio=ratio,
            change_pct=change_pct,
            ci95=(lo, hi),
            p_value=p_value,
            test=test,
            verdict=verdict,
            reason=reason,
            lower_is_better=lower_is_better,
            alpha=alpha,
            min_effect=min_effect,
            confidence=confidence,
        )

    if base_stats.n < MIN_REPLICATES or cand_stats.n < MIN_REPLICATES:
        return result(
            "no_change",
            f"too few replicates: baseline n={base_stats.n}, candidate n={cand_stats.n}, "
            f"at least {MIN_REPLICATES} per arm are needed (default {DEFAULT_REPLICATES}); "
            f"{headline}.",
        )

    if change == 0:
        return result("no_change", f"no_change: {headline}; the medians are equal.")

    # Which side of 1.0 is "better" for the ratio depends on the metric's direction.
    better = change > 0
    ratio_below_one = better == lower_is_better
    ci_on_side = hi < 1.0 if ratio_below_one else lo > 1.0
    significant = p_value < alpha
    large_enough = abs(change) >= min_effect - _EPS

    if ci_on_side and significant and large_enough:
        verdict: StatsVerdict = "win" if better else "regression"
        return result(
            verdict,
            f"{verdict}: {headline}; {ci_text} excludes 1.0, {p_text} < {_fmt(alpha)}, "
            f"and the {_pct(abs(change_pct))} effect meets the {_pct(100 * min_effect)} minimum.",
        )

    failures: list[str] = []
    if not ci_on_side:
        if lo <= 1.0 <= hi:
            failures.append(f"{ci_text} includes 1.0")
        else:
            failures.append(f"{ci_text} is not on the {direction} side of 1.0")
    if not significant:
        failures.append(f"{p_text} >= {_fmt(alpha)}")
    if not large_enough:
        failures.append(f"the {_pct(abs(change_pct))} effect is below the {_pct(100 * min_effect)} minimum")
    return result("no_change", f"no_change: {headline}, but {'; '.join(failures)}.")


def regression_guard(
    app_before: float,
    app_after: float,
    *,
    lower_is_better: bool = True,
    threshold: float = 0.02,
) -> bool:
    """The dftracer-io-optimization skill's non-degradation guard:
    True when the app metric got worse by MORE than ``threshold``.

    The relative worsening is ``(after - before) / |before|`` for lower-is-better metrics and
    ``(before - after) / |before|`` otherwise. Exactly ``threshold`` (2% by default) does not
    trigger the guard; anything beyond it (plus a 1e-9 float slack) does.
    """
    if not (math.isfinite(app_before) and math.isfinite(app_after)):
        raise ValueError(f"app metric values must be finite, got before={app_before}, after={app_after}")
    if app_before == 0:
        raise ValueError("app_before is 0: a relative change is undefined")
    if not (threshold >= 0.0 and math.isfinite(threshold)):
        raise ValueError(f"threshold must be a finite fraction >= 0, got {threshold}")
    return -relative_improvement(app_before, app_after, lower_is_better=lower_is_better) > threshold + _EPS


def undecided(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    lower_is_better: bool = True,
    win_pct: float = 5.0,
    paired: bool = False,
) -> bool:
    """True when ``compare`` says ``no_change`` but has not ruled out a change of ``win_pct``: the
    95% CI of the ratio still reaches a ``win_pct`` improvement (it straddles the win threshold),
    or the medians moved by ``win_pct`` or more either way. Such a comparison is undecided, not a
    measured absence of effect: more replicates can settle it, and the verdict on them keeps the
    same thresholds (a sequential design's extension, never a looser test). Needs
    ``MIN_REPLICATES`` per arm; ``paired`` as in :func:`compare`."""
    if min(len(baseline), len(candidate)) < MIN_REPLICATES:
        return False
    cmp = compare(baseline, candidate, lower_is_better=lower_is_better, paired=paired)
    if cmp.verdict != "no_change":
        return False
    if abs(cmp.change_pct) >= win_pct - _EPS:
        return True
    lo, hi = cmp.ci95
    return lo <= 1.0 - win_pct / 100.0 + _EPS if lower_is_better else hi >= 1.0 + win_pct / 100.0 - _EPS


def paired_bootstrap_ratio_ci(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of ``median(candidate) / median(baseline)`` over
    pairs: ``baseline[k]`` and ``candidate[k]`` were measured side by side, so pair indices are
    resampled jointly and a drift of the machine that moved both moves the two medians together
    (Efron & Tibshirani, the paired bootstrap). Deterministic for a given ``seed``."""
    base = _positive(baseline, "baseline")
    cand = _positive(candidate, "candidate")
    if base.size != cand.size:
        raise ValueError(f"paired arms need as many values each, got {base.size} and {cand.size}")
    _check_fraction(confidence, "confidence")
    rng = np.random.default_rng(seed)
    ratios = np.empty(resamples, dtype=np.float64)
    block = max(1, _BOOTSTRAP_BLOCK_CELLS // base.size)
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        idx = rng.integers(0, base.size, size=(rows, base.size))
        ratios[start : start + rows] = np.median(cand[idx], axis=1) / np.median(base[idx], axis=1)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail], method="linear")
    return float(lo), float(hi)


def signed_rank(baseline: Sequence[float], candidate: Sequence[float]) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test on the pairs' log ratios
    (``scipy.stats.wilcoxon``: exact for small tie-free samples). 1.0 when every pair is tied."""
    base = _positive(baseline, "baseline")
    cand = _positive(candidate, "candidate")
    diffs = np.log(cand) - np.log(base)
    if base.size < 2 or not np.any(diffs):
        return 1.0
    from scipy.stats import wilcoxon  # as in mann_whitney: imported when first used

    p = float(wilcoxon(diffs, alternative="two-sided").pvalue)
    return min(1.0, max(0.0, p)) if math.isfinite(p) else 1.0


#: Interim looks of an interleaved comparison use a stricter level than the final verdict, so
#: stopping early does not make a win easier to reach than a full set of replicates would.
INTERIM_ALPHA = 0.01
INTERIM_CONFIDENCE = 0.99


def early_stop(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    lower_is_better: bool = True,
    min_effect: float = 0.02,
) -> str | None:
    """Why the replicates collected so far already decide the comparison, or None to go on.

    Two ways to stop before the planned count: the verdict is clear (a win or a regression at the
    interim level, whose CI also clears the minimum effect), or the effect cannot reach the
    minimum (the interim CI of the ratio lies inside ``1 +- min_effect``: no further replicate
    would make a 2% change of it). Needs ``MIN_REPLICATES`` per arm."""
    if min(len(baseline), len(candidate)) < MIN_REPLICATES:
        return None
    lo, hi = bootstrap_ratio_ci(baseline, candidate, confidence=INTERIM_CONFIDENCE)
    if 1.0 - min_effect < lo and hi < 1.0 + min_effect:
        return (
            f"the effect cannot reach {100 * min_effect:g}%: the {100 * INTERIM_CONFIDENCE:g}% CI of the "
            f"ratio [{_fmt(lo)}, {_fmt(hi)}] lies inside 1 +- {min_effect:g}"
        )
    p = mann_whitney(baseline, candidate)
    clear = hi < 1.0 - min_effect or lo > 1.0 + min_effect
    if clear and p < INTERIM_ALPHA:
        better = (hi < 1.0) == lower_is_better
        return (
            f"the verdict is clear ({'win' if better else 'regression'}): the {100 * INTERIM_CONFIDENCE:g}% "
            f"CI of the ratio [{_fmt(lo)}, {_fmt(hi)}] clears {100 * min_effect:g}% and Mann-Whitney "
            f"p={_fmt(p)} < {INTERIM_ALPHA:g}"
        )
    return None
