"""Staging a data set per replicate: the metric with staging inside, the memory bound,
outputs copied back and the copy removed whatever happens (real files, real processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dftune.agents.optimizer.staging import read_share, stage_gap
from dftune.core.domain.measurements import StagePlan
from dftune.tools.guards.arms import Arm
from dftune.tools.runner import staging
from dftune.tools.runner.staging import (
    StagingError,
    adjusted_metric,
    outputs,
    room_for,
    stage_share,
    staged_replicate,
)
from dftune.tools.trace.model import AccessProfile, Analysis, FileAccess

GIB = 1 << 30


def make_data(root: Path, files: int = 6, size: int = 4096) -> Path:
    data = root / "data"
    (data / "sub").mkdir(parents=True)
    for i in range(files):
        (data / ("sub" if i % 2 else "") / f"s{i:03d}.bin").write_bytes(bytes([i]) * size)
    return data


def other_device_root(data: Path) -> Path | None:
    """A folder on another filesystem than ``data`` (/dev/shm here), or None on this machine."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and os.stat(shm).st_dev != os.stat(data).st_dev:
        return shm
    return None


def profile_of(*files: tuple[str, int, int]) -> Analysis:
    """An analysis holding only the access profile (what the arms and the read share look at)."""
    fs = [
        FileAccess(path=p, read_calls=1, read_bytes=r, write_calls=int(w > 0), write_bytes=w)
        for p, r, w in files
    ]
    return Analysis.model_construct(profile=AccessProfile(files=fs))


def test_the_guards_name_a_staged_file_as_the_original_one() -> None:
    original = Arm(analysis=profile_of(("/scratch/u/data/sub/s001.bin", 10, 0)), data_dir="/scratch/u/data")
    staged = Arm(
        analysis=profile_of(("/dev/shm/dftune-stage-1-ab/data/sub/s001.bin", 10, 0), ("/usr/lib/x.so", 5, 0)),
        data_dir="/scratch/u/data",
        staged_dir="/dev/shm/dftune-stage-1-ab/data",
    )
    assert list(original.files) == list(staged.files) == ["<data>/sub/s001.bin"]
    unmapped = Arm(analysis=staged.analysis, data_dir="/scratch/u/data")
    assert "<data>/sub/s001.bin" not in unmapped.files  # without the mapping: "different files"


def test_read_mostly_is_most_data_bytes_read_under_the_data_folder() -> None:
    reads = profile_of(("/d/a.bin", 900, 0), ("/out/log.txt", 0, 100))
    assert read_share(reads, "/d") == pytest.approx(0.9)
    writes = profile_of(("/d/a.bin", 100, 0), ("/out/ckpt.bin", 0, 900))
    assert read_share(writes, "/d") == pytest.approx(0.1)
    why = stage_gap(StagePlan(tier="shm"), "/d", writes)
    assert why is not None and "not a read-mostly data set" in why
    assert "no traced baseline" in (stage_gap(StagePlan(tier="shm"), "/d", None) or "")


# --------------------------------------------------------------------------- the metric


def test_wall_time_and_reported_times_gain_the_staging_seconds() -> None:
    assert adjusted_metric(10.0, kind="wall_time", lower_is_better=True, run_wall_s=10.0, stage_s=2.5) == 12.5
    assert adjusted_metric(4.0, kind="regex", lower_is_better=True, run_wall_s=10.0, stage_s=1.0) == 5.0


def test_a_reported_rate_is_scaled_by_the_share_of_the_replicate_the_run_had() -> None:
    # 100 MB/s over a 6 s run with 2 s of staging: the replicate moved the same bytes in 8 s
    got = adjusted_metric(100.0, kind="regex", lower_is_better=False, run_wall_s=6.0, stage_s=2.0)
    assert got == pytest.approx(75.0)
    assert stage_share(6.0, 2.0) == pytest.approx(0.25)


def test_no_staging_leaves_the_metric_alone() -> None:
    assert adjusted_metric(7.0, kind="wall_time", lower_is_better=True, run_wall_s=7.0, stage_s=0.0) == 7.0


# --------------------------------------------------------------------------- the memory bound


def test_shm_refused_above_a_fifth_of_node_memory() -> None:
    plan = StagePlan(tier="shm")
    memory = {"MemTotal": 16 * GIB, "MemAvailable": 12 * GIB}
    assert room_for(3 * GIB, plan, memory=memory, free=8 * GIB) == ""
    why = room_for(4 * GIB, plan, memory=memory, free=8 * GIB)
    assert "20% of node memory" in why and "3.20 GiB" in why


def test_shm_refused_above_the_memory_available_now_and_the_free_space() -> None:
    plan = StagePlan(tier="shm")
    busy = {"MemTotal": 64 * GIB, "MemAvailable": 1 * GIB}
    assert "available now" in room_for(2 * GIB, plan, memory=busy, free=30 * GIB)
    assert "does not fit" in room_for(2 * GIB, plan, memory=busy, free=1 * GIB)
    assert "memory unknown" in room_for(1, plan, memory={}, free=GIB)


def test_a_local_disk_is_bounded_by_its_free_space_only() -> None:
    plan = StagePlan(tier="local", root="/scratch")
    assert room_for(50 * GIB, plan, memory={}, free=60 * GIB) == ""
    assert "does not fit" in room_for(70 * GIB, plan, memory={}, free=60 * GIB)


def test_meminfo_is_read_in_bytes(tmp_path: Path) -> None:
    f = tmp_path / "meminfo"
    f.write_text("MemTotal:       16384 kB\nMemAvailable:    8192 kB\nHugePages_Total:       0\n")
    assert staging.meminfo(f) == {"MemTotal": 16 << 20, "MemAvailable": 8 << 20, "HugePages_Total": 0}
    assert staging.meminfo(tmp_path / "absent") == {}


def test_the_real_node_is_measured() -> None:
    mem = staging.meminfo()
    assert mem["MemTotal"] > 0 and 0 <= mem["MemAvailable"] <= mem["MemTotal"]


def test_staging_onto_the_same_filesystem_is_refused(tmp_path: Path) -> None:
    data = make_data(tmp_path)
    (tmp_path / "fast").mkdir()
    why = staging.check_plan(data, StagePlan(tier="local", root=str(tmp_path / "fast")))
    assert "already lies on the filesystem" in why
    assert "does not exist" in staging.check_plan(tmp_path / "none", StagePlan(tier="shm"))


# --------------------------------------------------------------------------- one staged replicate


def test_outputs_are_new_or_changed_data_files(tmp_path: Path) -> None:
    before = {"a": (1, 10), "b": (2, 20)}
    after = {"a": (1, 10), "b": (2, 21), "c": (5, 30), "__pycache__/m.cpython-311.pyc": (9, 40)}
    # a byte-code cache the run left in the copy is not the program's output (core/facts/paths.py)
    assert outputs(before, after, tmp_path / "copy") == ["b", "c"]


def test_a_replicate_reads_the_copy_its_outputs_come_back_and_the_copy_goes(tmp_path: Path) -> None:
    data = make_data(tmp_path)
    root = other_device_root(data)
    if root is None:
        pytest.skip("no second filesystem to stage onto")
    plan = StagePlan(tier="shm", root=str(root))
    with staged_replicate(data, plan, str(tmp_path)) as st:
        assert st.path != data and st.files_in == 6 and st.bytes_in == 6 * 4096
        assert (st.path / "sub" / "s001.bin").read_bytes() == (data / "sub" / "s001.bin").read_bytes()
        (st.path / "out").mkdir()
        (st.path / "out" / "result.txt").write_text("done")
        home = st.home
    assert (data / "out" / "result.txt").read_text() == "done"
    assert st.outputs == ["out/result.txt"] and st.copy_back_s >= 0 and st.stage_in_s > 0
    assert not home.exists()


def test_the_copy_goes_when_the_run_fails(tmp_path: Path) -> None:
    data = make_data(tmp_path)
    root = other_device_root(data)
    if root is None:
        pytest.skip("no second filesystem to stage onto")
    plan = StagePlan(tier="shm", root=str(root))
    with pytest.raises(RuntimeError), staged_replicate(data, plan, str(tmp_path)) as st:
        (st.path / "partial.out").write_text("half")
        raise RuntimeError("the program crashed")
    assert not st.home.exists()
    assert not (data / "partial.out").exists()  # a failed run's outputs are not copied back


def test_a_data_set_that_does_not_fit_is_refused_with_the_reason(tmp_path: Path) -> None:
    data = make_data(tmp_path)
    root = other_device_root(data)
    if root is None:
        pytest.skip("no second filesystem to stage onto")
    tiny = StagePlan(tier="shm", root=str(root), shm_share=1e-9)
    with pytest.raises(StagingError, match="exceeds 0% of node memory"), staged_replicate(data, tiny, "k"):
        pass


def test_a_copy_left_by_a_dead_dftune_is_removed_but_a_live_ones_stays(tmp_path: Path) -> None:
    dead = tmp_path / f"{staging.STAGE_PREFIX}999999-abc"
    live = tmp_path / f"{staging.STAGE_PREFIX}{os.getpid()}-def"
    other = tmp_path / f"{staging.STAGE_PREFIX}unmarked"
    for d in (dead, live, other):
        (d / "data").mkdir(parents=True)
    (dead / staging.MARKER).write_text(json.dumps({"pid": 999999, "start": 1}))
    me = staging.proc_info(os.getpid())
    assert me is not None
    (live / staging.MARKER).write_text(json.dumps({"pid": os.getpid(), "start": me.start}))
    assert staging.remove_stale(tmp_path) == [str(dead)]
    assert live.exists() and other.exists() and not dead.exists()


STAGER = """
import sys, time
from pathlib import Path
from dftune.tools.runner.staging import StagePlan, staged_replicate
with staged_replicate(Path(sys.argv[1]), StagePlan(tier="local", root=sys.argv[2]), "k") as st:
    print(st.home, flush=True)
    time.sleep(60)
"""


def test_sigkill_of_dftune_still_removes_the_staged_copy(tmp_path: Path) -> None:
    """The guardian outlives a SIGKILLed dftune and removes the marked copy it was told of."""
    data = make_data(tmp_path)
    root = other_device_root(data)
    if root is None:
        pytest.skip("no second filesystem to stage onto")
    proc = subprocess.Popen(
        [sys.executable, "-c", STAGER, str(data), str(root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        home = Path(proc.stdout.readline().strip())
        assert home.is_dir() and (home / staging.MARKER).is_file()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while home.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not home.exists()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_staged_arms_io_bandwidth_counts_the_copies_as_io_time() -> None:
    from dftune.agents.measure import staged_bandwidth
    from dftune.tools.runner.bench import Replicate

    def rep(i: int, stage_s: float | None) -> Replicate:
        return Replicate(
            index=i, status="ok", wall_s=1.0, exit_code=0, metric=1.0, traced=True, stage_s=stage_s
        )

    # 100 MB/s over 0.1 s of traced I/O, and 0.3 s (median) of copying: 10 MB in 0.4 s
    reps = [rep(0, 0.2), rep(1, 0.3), rep(2, 0.5)]
    assert staged_bandwidth(100e6, 0.1, reps) == pytest.approx(25e6)
    assert staged_bandwidth(100e6, 0.1, [rep(0, None)]) == 100e6
