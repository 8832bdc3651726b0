"""The trace models: each estimate comes from the trace's own numbers, follows the lever, and is
capped by the I/O compute does not hide; a change that does not act on a metric says n/a."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.agents.optimizer.estimates import Lever, TraceFacts, estimate, estimate_models
from dftune.tools.guards import Arm
from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace

KIB = 1024
DATA = "/data/run"


def _facts(tmp: Path, procs: list[Proc], fs_type: str = "ext4") -> TraceFacts:
    folder = write_trace(tmp / "t", procs)
    return TraceFacts(Arm(analysis=analyze([folder], profile=True), data_dir=DATA), fs_type=fs_type, cores=2)


def _small_writer(record: int = 4 * KIB, n: int = 200, dur: int = 50, compute: int = 0) -> list[Proc]:
    p = Proc(pid=1)
    p.open(f"{DATA}/out.bin")
    for _ in range(n):
        p.write(f"{DATA}/out.bin", record, dur=dur)
        if compute:
            p.compute(compute)
    p.close(f"{DATA}/out.bin")
    return [p]


def _reader(
    files: int = 20,
    size: int = 64 * KIB,
    chunk: int = 4 * KIB,
    twice: bool = False,
    dur: int = 40,
    shuffled: bool = False,
) -> list[Proc]:
    p = Proc(pid=2)
    for i in range(files):
        path = f"{DATA}/s{i:03d}.bin"
        offsets = [k * chunk for k in range(size // chunk)]
        if shuffled:  # even offsets up, odd ones down: one read of 15 starts where the previous ended
            offsets = offsets[::2] + offsets[1::2][::-1]
        for _ in range(2 if twice else 1):
            p.open(path)
            for off in offsets:
                p.read(path, chunk, offset=off, dur=dur)
            p.close(path)
    return [p]


def test_every_checklist_category_has_a_model() -> None:
    assert sorted(estimate_models().model) == list(range(1, 13))


def test_coalescing_small_writes_is_priced_from_the_trace_and_capped_by_the_bound(tmp_path: Path) -> None:
    f = _facts(tmp_path, _small_writer())
    e = estimate(1, f, Lever(target_bytes=1024 * KIB))
    assert 0 < e.app_pct <= f.bound_pct
    assert "small calls of 4.0 KiB" in e.reason and "bound" in e.reason
    assert e.system_pct is not None and e.system_pct > 0  # the same bytes in less I/O wall time


def test_a_larger_target_saves_more_up_to_the_bound(tmp_path: Path) -> None:
    f = _facts(tmp_path, _small_writer())
    small, large = (estimate(1, f, Lever(target_bytes=t)).app_pct for t in (16 * KIB, 1024 * KIB))
    assert small < large <= f.bound_pct


def test_coalescing_is_worth_nothing_once_the_calls_are_large(tmp_path: Path) -> None:
    f = _facts(tmp_path, _small_writer(record=4096 * KIB, n=20))
    assert estimate(1, f).app_pct == 0.0


def test_buffering_a_shuffled_stream_is_worth_what_its_neighbouring_calls_are(tmp_path: Path) -> None:
    """A buffer merges calls that continue one another; small reads in a shuffled order have no
    neighbours to merge (making them neighbours is a change of the access pattern)."""
    in_order = estimate(1, _facts(tmp_path / "a", _reader()), Lever(target_bytes=64 * KIB))
    shuffled = estimate(1, _facts(tmp_path / "b", _reader(shuffled=True)), Lever(target_bytes=64 * KIB))
    assert in_order.app_pct > 0 and "x 1.00 of the calls continuing the previous one" in in_order.reason
    assert "x 0.07 of the calls continuing" in shuffled.reason
    assert shuffled.app_pct < in_order.app_pct / 10


def test_caching_is_worth_nothing_without_rereads_and_something_with_them(tmp_path: Path) -> None:
    once = estimate(2, _facts(tmp_path / "a", _reader()))
    twice = estimate(2, _facts(tmp_path / "b", _reader(twice=True)))
    assert once.app_pct == 0.0 and "nothing is read more than once" in once.reason
    assert twice.app_pct > 0 and "re-reads: 50%" in twice.reason


def test_parallel_readers_scale_with_the_lever_and_stop_at_the_cores(tmp_path: Path) -> None:
    f = _facts(tmp_path, _reader())
    two, four, sixteen = (estimate(6, f, Lever(factor=k)).app_pct for k in (2, 4, 16))
    assert 0 < two <= four
    assert four == sixteen  # capped by the 2 cores of the facts
    assert "capped by 2 cores" in estimate(6, f, Lever(factor=4)).reason


def test_the_core_cap_applies_to_the_count_that_results(tmp_path: Path) -> None:
    """2 -> 4 readers on 2 cores adds no core: it is not worth what 1 -> 2 is (the same factor)."""
    f = _facts(tmp_path, _reader())
    one_two = estimate(6, f, Lever(factor=2, counts=(1, 2)))
    two_four = estimate(6, f, Lever(factor=2, counts=(2, 4)))
    one_four = estimate(6, f, Lever(factor=4, counts=(1, 4)))
    assert one_two.app_pct > 0 and two_four.app_pct == 0.0
    assert one_four.app_pct == one_two.app_pct  # the third and fourth reader find no core
    assert "readers 2 -> 4, capped by 2 cores" in two_four.reason


def test_async_writes_hide_at_most_the_compute_and_do_not_change_bandwidth(tmp_path: Path) -> None:
    without = estimate(4, _facts(tmp_path / "a", _small_writer()))
    with_compute = estimate(4, _facts(tmp_path / "b", _small_writer(compute=200)))
    assert without.app_pct == 0.0  # nothing to hide the writes behind
    assert with_compute.app_pct > 0
    assert with_compute.system_pct is None and with_compute.system_reason.startswith("n/a")


def test_striping_is_not_applicable_off_a_parallel_file_system(tmp_path: Path) -> None:
    e = estimate(10, _facts(tmp_path, _small_writer(), fs_type="ext4"))
    assert e.app_pct == 0.0 and "n/a on ext4" in e.reason


@pytest.mark.parametrize("category", range(1, 13))
def test_no_estimate_exceeds_the_bound(tmp_path: Path, category: int) -> None:
    procs = [*_small_writer(compute=20), *_reader(twice=True)]
    f = _facts(tmp_path, procs, fs_type="lustre")
    for lever in (Lever(), Lever(factor=64), Lever(target_bytes=64 * 1024 * KIB)):
        e = estimate(category, f, lever)
        assert 0.0 <= e.app_pct <= f.bound_pct + 1e-9
        assert e.reason


def test_no_merge_is_larger_than_a_files_calls(tmp_path: Path) -> None:
    """2,000 files of 16 KiB read 4 KiB at a time: a request merges at most a file's 4 calls
    (16 KiB), never '1,024 to one (4,096 KiB)'."""
    f = _facts(tmp_path, _reader(files=40, size=16 * KIB, chunk=4 * KIB))
    e = estimate(1, f, Lever(target_bytes=4096 * KIB, directions=("read",)))
    assert "merged 4.0 to one (16.0 KiB, a file's calls: no request spans two files)" in e.reason, e.reason
    one_file = _facts(tmp_path / "big", _reader(files=1, size=1024 * KIB, chunk=4 * KIB))
    big = estimate(1, one_file, Lever(target_bytes=64 * KIB, directions=("read",)))
    assert "merged 16.0 to one (64.0 KiB)" in big.reason, big.reason  # the target bounds it
