"""Process roles and path classes in the diagnosis, on exact traces written by tests/tracegen.py.

A rank's worker processes belong to it (no imbalance between a main process and its readers),
the interpreter's start-up reads do not decide the diagnosis of a program with data I/O of its
own, and system pseudo-files stay out of the file view unless asked for.
"""

from __future__ import annotations

from pathlib import Path

from dftune.core.facts.paths import classify
from dftune.tools.diagnose.engine import diagnose
from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace

DATA = "/scratch/run/train.bin"


def _loader(folder: Path, workers: int) -> Path:
    """A main process that computes and, with ``workers`` > 0, worker processes that read for it."""
    main = Proc(pid=100, ts=1_000)
    main.open("/scratch/run/index.json")
    main.read("/scratch/run/index.json", 4096, dur=50)
    procs = [main]
    if workers == 0:
        for i in range(40):
            main.read(DATA, 65536, offset=i * 65536, dur=2_000)
            main.compute(3_000)
    else:
        for w in range(workers):
            proc = Proc(pid=200 + w, ts=60_000 + w * 10)  # forked 60 ms after the main process started
            proc.open(DATA)
            for i in range(w, 40, workers):
                proc.read(DATA, 65536, offset=i * 65536, dur=2_000)
            procs.append(proc)
        for _ in range(40):
            main.compute(3_000)
    return write_trace(folder, procs)


def test_workers_belong_to_their_main_process(tmp_path: Path) -> None:
    a = analyze([_loader(tmp_path / "w", 2)], views=["proc"])
    assert a.app_processes == 3
    assert len(a.rank_groups) == 1
    group = a.rank_groups[0]
    assert group.main.endswith(":100") and sorted(group.workers) == [
        f"{group.main.split(':')[0]}:200",
        f"{group.main.split(':')[0]}:201",
    ]
    assert group.bytes == 4096 + 40 * 65536
    assert a.imbalance.bytes_max_min == 0.0  # one group: nothing to compare


def test_loader_diagnoses_like_its_single_process_equivalent(tmp_path: Path) -> None:
    multi = diagnose([_loader(tmp_path / "multi", 2)])
    single = diagnose([_loader(tmp_path / "single", 0)])
    cats = {b.category for b in multi.bottlenecks}
    assert not cats & {"imbalance", "stragglers"}, [b.evidence for b in multi.bottlenecks]
    # the workers read while the main process computes: overlap is measured across the group's processes
    assert "unoverlapped-io" not in cats, [b.evidence for b in multi.bottlenecks]
    assert multi.bottlenecks[0].category == single.bottlenecks[0].category == "read-time"


def test_overlap_is_measured_over_the_rank_group(tmp_path: Path) -> None:
    a = analyze([_loader(tmp_path / "w", 2)])
    # 40 reads of 2 ms in the workers, all inside the main process's 120 ms of compute but the
    # main process's own 50 us read of its index before it starts computing
    assert a.unoverlapped_io_time_s < 0.001
    assert 0.0 < a.unoverlapped_io_fraction < 0.02
    lone = analyze([_loader(tmp_path / "s", 0)])  # one process reading between its compute steps
    assert lone.unoverlapped_io_fraction == 1.0


def test_two_peer_processes_are_still_compared(tmp_path: Path) -> None:
    """Two processes started together (peers, no rank) stay two groups: a real imbalance is kept."""
    a, b = Proc(pid=10, ts=1_000), Proc(pid=11, ts=1_100)
    for i in range(30):
        a.write("/scratch/out.0", 1 << 20, offset=i << 20, dur=1_000)
    b.write("/scratch/out.1", 1 << 20, offset=0, dur=1_000)
    for _ in range(40):
        b.compute(1_000)
    a.compute(15_000)
    d = diagnose([write_trace(tmp_path / "peers", [a, b])])
    assert any(x.category == "imbalance" for x in d.bottlenecks)


def _startup_then_writes(folder: Path) -> Path:
    """Slow start-up reads of the interpreter's own files, then the program's checkpoint writes."""
    p = Proc(pid=300)
    libs = [f"/usr/lib/python3.11/lib-dynload/m{i}.cpython-311-x86_64-linux-gnu.so" for i in range(30)]
    libs += [f"/home/u/.venv/lib/python3.11/site-packages/pkg/mod{i}.py" for i in range(30)]
    for lib in libs:
        p.open(lib)
        p.read(lib, 8192, dur=3_000)
        p.close(lib)
    p.open("/proc/self/maps")
    p.read("/proc/self/maps", 4096, dur=5_000)
    p.open("/scratch/ckpt/model.pt")
    for i in range(8):
        p.write("/scratch/ckpt/model.pt", 1 << 22, offset=i << 22, dur=4_000)
    return write_trace(folder, [p])


def test_startup_reads_are_set_apart(tmp_path: Path) -> None:
    d = diagnose([_startup_then_writes(tmp_path / "t")])
    assert d.bottlenecks[0].category == "write-time", [b.evidence for b in d.bottlenecks]
    apart = {s.path_class: s for s in d.set_apart}
    assert apart["runtime"].files == 60 and apart["runtime"].read_count == 60
    assert apart["system"].files == 1
    assert any("runtime" in n and "start-up" in n for n in d.notes)


def test_system_paths_leave_the_file_view_unless_included(tmp_path: Path) -> None:
    trace = _startup_then_writes(tmp_path / "t")
    a = analyze([trace], views=["file"])
    paths = [r["path"] for r in a.views["file"]["rows"]]
    assert "/proc/self/maps" not in paths and "/scratch/ckpt/model.pt" in paths
    assert a.views["file"]["system_paths"]["files"] == 1 and not a.views["file"]["system_paths"]["included"]
    assert a.views["file"]["total"] == len(paths)
    every = analyze([trace], views=["file"], include_system_paths=True)
    assert "/proc/self/maps" in [r["path"] for r in every.views["file"]["rows"]]


def test_a_program_with_only_startup_reads_is_judged_on_them(tmp_path: Path) -> None:
    p = Proc(pid=5)
    for i in range(10):
        p.open(f"/usr/lib/x{i}.so")
        p.read(f"/usr/lib/x{i}.so", 4096, dur=100)
    d = diagnose([write_trace(tmp_path / "o", [p])])
    assert [s.path_class for s in d.set_apart] == []
    assert d.bottlenecks and d.bottlenecks[0].category == "read-time"


def test_path_classes() -> None:
    assert classify("/proc/net/route").class_ == "system"
    assert classify("/dev/shm/dataset/x.bin").class_ == "data"
    assert classify("/sys/class/kfd/kfd/topology/nodes/1/gpu_id").class_ == "system"
    assert classify("/opt/py/lib/python3.11/json/__init__.py").class_ == "runtime"
    assert (
        classify("/x/.venv/lib/python3.11/site-packages/numpy/core/_multiarray_umath.so").class_ == "runtime"
    )
    assert classify("/etc/ld.so.cache").class_ == "runtime"
    assert classify("/etc/resolv.conf").class_ == "config"
    assert classify("/scratch/data/train-00001.tfrecord").class_ == "data"
    assert classify("fhash:0123abcd").class_ == "data"


def test_calls_naming_no_file_are_judged_when_they_are_most_of_the_io(tmp_path: Path) -> None:
    """A trace whose reads name no file (no metadata for them) is not judged on the few that do."""
    p = Proc(pid=9)
    for _ in range(50):
        p.event("read", dur=1_000, ret=65536, count=65536)  # no fhash: the trace names no file
    p.open("/usr/lib/x.so")
    p.read("/usr/lib/x.so", 4096, dur=10)
    p.open("/scratch/out.bin")
    p.write("/scratch/out.bin", 4096, offset=0, dur=10)
    d = diagnose([write_trace(tmp_path / "n", [p])])
    assert d.bottlenecks[0].category == "read-time", [b.evidence for b in d.bottlenecks]
    assert [s.path_class for s in d.set_apart] == ["runtime"]
