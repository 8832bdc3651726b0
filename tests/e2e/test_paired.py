"""Interleaved arms for real: one replicate of each in turn, prepared once, stopping once the
data decide (no effect possible, or a clear one), and one extension for a large unclear effect."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dftune.tools.runner.paired import ArmPlan, paired_bench
from dftune.tools.runner.spec import WorkloadSpec

pytestmark = pytest.mark.e2e

#: prints the metric of its n-th run from a sequence: the arm's own counter file counts the runs
PROGRAM = textwrap.dedent("""
    import os, sys, time
    arm, seq = sys.argv[1], [float(x) for x in sys.argv[2].split(",")]
    counter = os.path.join(os.environ["WORKDIR"], "runs")
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    open(counter, "w").write(str(n + 1))
    with open(os.environ["ORDER"], "a") as fh:
        fh.write(f"{arm} {time.time_ns()}\\n")
    print(f"metric {seq[n % len(seq)]}")
""")


def _spec(tmp: Path, ref_seq: str, cand_seq: str) -> WorkloadSpec:
    (tmp / "prog.py").write_text(PROGRAM)
    return WorkloadSpec.model_validate(
        {
            "name": "paired",
            "command": ["{python}", "prog.py", "{ARM}", "{SEQ}"],
            "cwd": str(tmp),
            "setup": ["{python}", "-c", "open('{workdir}/setup-ran', 'a').write('x')"],
            "metric": {"kind": "stdout_regex", "pattern": "metric ([0-9.]+)"},
            "tracing": {"mode": "off"},
            "env": {"ORDER": str(tmp / "order.log")},
            "knobs": [
                {"name": "ARM", "kind": "arg", "values": ["A", "B"], "default": "A"},
                {"name": "SEQ", "kind": "arg", "values": [ref_seq, cand_seq], "default": ref_seq},
            ],
            "spec_path": str(tmp / "workload.toml"),
        }
    )


def _plans(tmp: Path, ref_seq: str, cand_seq: str) -> tuple[ArmPlan, ArmPlan]:
    spec = _spec(tmp, ref_seq, cand_seq)
    ref = ArmPlan(spec, tmp / "ref", {"ARM": "A", "SEQ": ref_seq}, {"WORKDIR": str(tmp / "ref")})
    cand = ArmPlan(spec, tmp / "cand", {"ARM": "B", "SEQ": cand_seq}, {"WORKDIR": str(tmp / "cand")})
    for plan in (ref, cand):
        plan.workdir.mkdir()
    return ref, cand


def _order(tmp: Path) -> list[str]:
    return [line.split()[0] for line in (tmp / "order.log").read_text().splitlines()]


def test_arms_alternate_and_each_is_prepared_once(tmp_path: Path) -> None:
    ref, cand = _plans(tmp_path, "10,10.5,9.7,10.2,9.9", "8,8.4,7.9,8.2,8.1")
    r = paired_bench(ref, cand, max_pairs=5, lower_is_better=True)
    order = _order(tmp_path)
    # counterbalanced: A B, then B A, so a steady drift favours neither arm
    assert order[: 2 * r.pairs] == [
        x for k in range(r.pairs) for x in (("A", "B") if k % 2 == 0 else ("B", "A"))
    ]
    for plan in (ref, cand):
        assert (plan.workdir / "setup-ran").read_text() == "x"  # the setup ran once per arm
    assert [x.index for x in r.reference.replicates] == list(range(r.pairs))
    assert any("interleaved" in n for n in r.candidate.notes)


def test_an_effect_that_cannot_reach_two_percent_stops_after_three_pairs(tmp_path: Path) -> None:
    ref, cand = _plans(tmp_path, "10.0,10.01,9.99", "10.02,10.0,10.01")
    r = paired_bench(ref, cand, max_pairs=10, lower_is_better=True)
    assert r.pairs == 3 and r.stopped_early and "cannot reach 2%" in r.stopped_early
    assert any("stopped early after 3 of 10" in n for n in r.candidate.notes)


def test_a_clear_win_stops_before_the_planned_count(tmp_path: Path) -> None:
    ref, cand = _plans(tmp_path, "10,10.4,9.8,10.1,9.9,10.2", "5,5.2,4.9,5.1,5.05,4.95")
    r = paired_bench(ref, cand, max_pairs=12, lower_is_better=True)
    assert r.stopped_early and "verdict is clear (win)" in r.stopped_early
    assert 5 <= r.pairs < 12  # Mann-Whitney needs 5 a side to pass the interim level


def test_a_noisy_large_effect_gets_one_extension(tmp_path: Path) -> None:
    ref, cand = _plans(tmp_path, "10,14,8,12,9", "9,7,13,8,10.5")
    r = paired_bench(ref, cand, max_pairs=5, extra_pairs=5, lower_is_better=True, extend_at_pct=5.0)
    assert r.pairs == 10 and any("5 more pair(s)" in n for n in r.candidate.notes)


def test_noise_alone_runs_the_planned_pairs(tmp_path: Path) -> None:
    ref, cand = _plans(tmp_path, "10,11,9,10.5,9.5", "10.2,9.1,11,9.6,10.4")
    r = paired_bench(ref, cand, max_pairs=5, lower_is_better=True)
    assert r.pairs == 5 and r.stopped_early is None
