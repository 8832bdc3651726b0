"""A sitting under a drift, for real (subprocesses whose metric follows the sitting's run count):
the counterbalanced order leaves a steady drift with no winner, and a win that the drift hides
from the two-arm test is found pair by pair after the extension."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dftune.tools.runner.paired import ArmPlan, paired_bench, paired_values
from dftune.tools.runner.spec import WorkloadSpec
from dftune.tools.runner.stats import compare

pytestmark = pytest.mark.e2e

#: the metric of the sitting's n-th run (both arms count together): a machine that warms up by
#: STEP per run, times the arm's FACTOR, with a fixed wobble
PROGRAM = textwrap.dedent("""
    import os, sys
    factor, step = float(sys.argv[1]), float(sys.argv[2])
    counter = os.environ["COUNTER"]
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    open(counter, "w").write(str(n + 1))
    wobble = [0.02, -0.03, 0.01, 0.0, -0.01, 0.03, -0.02, 0.015, -0.005, 0.025][n % 10]
    print(f"metric {factor * (10.0 - step * n + wobble)}")
""")


def _plans(tmp: Path, factor: float, step: float) -> tuple[ArmPlan, ArmPlan]:
    (tmp / "prog.py").write_text(PROGRAM)
    spec = WorkloadSpec.model_validate(
        {
            "name": "drift",
            "command": ["{python}", "prog.py", "{FACTOR}", "{STEP}"],
            "cwd": str(tmp),
            "metric": {"kind": "stdout_regex", "pattern": "metric ([0-9.]+)"},
            "tracing": {"mode": "off"},
            "env": {"COUNTER": str(tmp / "runs")},
            "knobs": [
                {"name": "FACTOR", "kind": "arg", "values": ["1.0", str(factor)], "default": "1.0"},
                {"name": "STEP", "kind": "arg", "values": [str(step)], "default": str(step)},
            ],
            "spec_path": str(tmp / "workload.toml"),
        }
    )
    ref = ArmPlan(spec, tmp / "ref", {"FACTOR": "1.0", "STEP": str(step)})
    cand = ArmPlan(spec, tmp / "cand", {"FACTOR": str(factor), "STEP": str(step)})
    return ref, cand


def test_a_steady_drift_alone_is_no_win(tmp_path: Path) -> None:
    ref, cand = _plans(tmp_path, 1.0, 0.3)
    r = paired_bench(ref, cand, max_pairs=10, lower_is_better=True)
    pairs = paired_values(r)
    assert pairs is not None and len(pairs[0]) == r.pairs
    assert compare(*pairs, paired=True).verdict == "no_change"


def test_a_win_the_drift_hides_is_extended_and_found_pair_by_pair(tmp_path: Path) -> None:
    ref, cand = _plans(tmp_path, 0.93, 0.3)  # 7% faster, on a machine that speeds up 3% a run
    r = paired_bench(ref, cand, max_pairs=5, extra_pairs=5, lower_is_better=True, extend_at_pct=5.0)
    assert r.pairs == 10 and any("undecided after 5 pair(s)" in n for n in r.candidate.notes)
    pairs = paired_values(r)
    assert pairs is not None
    assert compare(*pairs).verdict == "no_change"  # two arms apart: the drift is all the spread
    assert compare(*pairs, paired=True).verdict == "win"
