"""How the verifier's decision behaves under a drifting load: false wins and power, simulated.

    python benchmarks/bench_decision.py                      # 0%, 8% and 15% effects, 300 sittings each
    python benchmarks/bench_decision.py --effect 0 --sittings 1000 --seed 3

Each simulated sitting is 10 runs a side of a metric (times, lower is better) on a machine whose
load follows an AR(1) process over the sitting's runs (phi 0.8, innovations of 12% in log space,
plus 5% white noise): the kind of drift other jobs on 2 shared cores give. The candidate is
``effect`` faster. Two rules decide each sitting, with the real functions of
``tools/runner/stats.py`` and ``tools/kb/verdict.py``:

- ``apart``: the arms in a fixed order (A B, A B, ...) compared as independent samples, extended
  from 5 to 10 pairs only when the medians moved 5% (the rule before the paired analysis);
- ``paired``: counterbalanced order (A B, B A, ...), compared apart at 5 pairs, extended when
  ``undecided``, then compared pair by pair at 10 (what the verifier does now).

A false win (a ``win`` verdict at effect 0) must stay below the test's one-sided level (2.5%).
Nothing is timed: the numbers depend only on the seed.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from dftune.tools.kb.verdict import decide
from dftune.tools.runner.stats import compare, undecided


def sitting(
    rng: np.random.Generator, effect: float, abba: bool, pairs: int
) -> tuple[list[float], list[float]]:
    x, runs = 0.0, []
    for _ in range(2 * pairs):
        x = 0.8 * x + rng.normal(0, 0.12)
        runs.append(float(np.exp(x + rng.normal(0, 0.05))))
    ref, cand = [], []
    for k in range(pairs):
        a, b = runs[2 * k], runs[2 * k + 1]
        if abba and k % 2:
            a, b = b, a
        ref.append(0.3 * a)
        cand.append(0.3 * (1 - effect) * b)
    return ref, cand


def verdict(ref: list[float], cand: list[float], paired: bool) -> str:
    c = compare(ref, cand, paired=paired)
    before, after = c.baseline.median, c.candidate.median
    return decide([], metric="t", before=before, after=after, lower_is_better=True, comparison=c).verdict


def apart(ref: list[float], cand: list[float]) -> str:
    first = compare(ref[:5], cand[:5])
    if first.verdict == "no_change" and abs(first.change_pct) >= 5.0:
        return verdict(ref, cand, False)
    return verdict(ref[:5], cand[:5], False)


def paired(ref: list[float], cand: list[float]) -> str:
    if undecided(ref[:5], cand[:5], win_pct=5.0):
        return verdict(ref, cand, True)
    return verdict(ref[:5], cand[:5], False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--effect", type=float, action="append", help="the candidate's true gain (0.15 = 15%)")
    ap.add_argument("--sittings", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    for effect in args.effect or [0.0, 0.08, 0.15]:
        rng = np.random.default_rng(args.seed)
        counts: dict[str, dict[str, int]] = {r: {"win": 0, "regression": 0} for r in ("apart", "paired")}
        for _ in range(args.sittings):
            for rule, decided, abba in (("apart", apart, False), ("paired", paired, True)):
                v = decided(*sitting(rng, effect, abba, 10))
                counts[rule][v] = counts[rule].get(v, 0) + 1
        n = args.sittings
        row = "  ".join(
            f"{rule}: win {c['win'] / n:.1%} regression {c['regression'] / n:.1%}"
            for rule, c in counts.items()
        )
        print(f"effect {effect:>4.0%}  {row}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
