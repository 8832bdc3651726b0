"""Which replicate's trace an arm is judged by: the fullest, so events a tracer lost in one
replicate never make a program look as if it did less (real trace files, the real engine)."""

from __future__ import annotations

from pathlib import Path

from dftune.agents.measure import fullest_trace
from dftune.tools.runner.bench import BenchResult, Replicate
from tests.unit.test_report import _trace


def _result(tmp_path: Path, reads: list[int]) -> BenchResult:
    reps = []
    for i, n in enumerate(reads):
        d = tmp_path / f"r{i}"
        d.mkdir()
        _trace(d, 100 + i, 1_000, n, 4096)
        reps.append(
            Replicate(
                index=i, status="ok", wall_s=1.0, exit_code=0, metric=1.0, traced=True, trace_dir=str(d)
            )
        )
    return BenchResult(
        workload="w",
        spec_path="/w.toml",
        settings={},
        traced=True,
        metric={},
        replicates=reps,
        ok=len(reps),
        median=1.0,
        p95=1.0,
        ci95=None,
        trace_dir=str(tmp_path),
        workdir=str(tmp_path),
        cache_policy="warm_up",
        started="2026-12-01T00:00:00Z",
    )


def test_a_replicate_whose_trace_lost_events_is_not_the_one_judged(tmp_path: Path) -> None:
    got = fullest_trace(_result(tmp_path, [62, 64, 64]))
    best, notes = got.replicate, got.notes
    assert best is not None and best.index == 1
    assert notes and "r0 holds 3.1% fewer I/O bytes than r1" in notes[0]
    # analyzed once, with its profile: the caller does not read the trace again
    assert got.analysis is not None and got.analysis.profile is not None
    assert got.analysis.read.bytes == 64 * 4096  # the fullest replicate's, not r0's 62 reads
    assert got.seen["read"]  # what every replicate read, for the guards


def test_agreeing_traces_take_the_first_and_say_nothing(tmp_path: Path) -> None:
    got = fullest_trace(_result(tmp_path, [64, 64]))
    assert got.replicate is not None and got.replicate.index == 0 and got.notes == []


def test_one_replicate_is_used_as_it_is(tmp_path: Path) -> None:
    got = fullest_trace(_result(tmp_path, [10]))
    assert got.replicate is not None and got.replicate.index == 0 and got.notes == []
    assert got.seen == {}  # one replicate says nothing of what another lost
