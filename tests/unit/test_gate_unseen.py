"""The worth-tuning gate counts what a POSIX trace cannot show as I/O, and says which.

Traces written by tests/tracegen.py: MPI ranks whose little traced I/O goes to one shared file
(time in collectives is outside every traced call), a loader whose main process reports its own
waits for data, and a plain program with little I/O that the gate still stops.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from dftune.tools.diagnose.engine import diagnose
from dftune.tools.diagnose.unseen import metric_wait
from tests.tracegen import Proc, write_trace

SHARED = "/scratch/job/restart.dat"


def _ranks(folder: Path, *, rank: bool, shared: bool) -> Path:
    """Two long-lived processes doing 1 KiB writes (about 1% of their time); ranks 0 and 1 when ``rank``."""
    procs = []
    for r in range(2):
        p = Proc(pid=40 + r, ts=1_000 + r * 3)
        p.event("MPI_Init", cat="APP", dur=5, **({"rank": r} if rank else {}))
        path = SHARED if shared else f"/scratch/job/out.{r}"
        p.open(path)
        for i in range(20):
            p.write(path, 1024, offset=(i * 2 + r) * 1024, dur=100)
            p.ts += 50_000  # the rank waits in a collective between its writes: nothing traced
        p.close(path)
        procs.append(p)
    return write_trace(folder, procs)


def test_mpi_ranks_on_a_shared_file_pass_the_gate_and_say_why(tmp_path: Path) -> None:
    d = diagnose([_ranks(tmp_path / "mpi", rank=True, shared=True)])
    assert d.io_fraction < 0.05
    assert d.worth_tuning, d.gate.reason
    sources = {p.source: p for p in d.gate.possibly_io}
    assert sources["mpi-collectives"].fraction > 0.9
    assert "mpi-collectives" in d.gate.reason and "written by all 2 ranks" in d.gate.reason


def test_processes_without_mpi_are_still_gated(tmp_path: Path) -> None:
    d = diagnose([_ranks(tmp_path / "plain", rank=False, shared=False)])
    assert not d.worth_tuning
    assert d.gate.possibly_io == []
    assert "no MPI-IO, no wait events of the program" in d.gate.reason


def test_mpi_ranks_on_their_own_files_need_mpiio_in_the_program(tmp_path: Path) -> None:
    from dftune.tools.diagnose.engine import diagnose_analysis
    from dftune.tools.trace import analyze

    a = analyze(
        [_ranks(tmp_path / "nn", rank=True, shared=False)], views=["file", "proc"], exclude_helpers=True
    )
    assert not diagnose_analysis(a).worth_tuning  # file per rank, nothing says MPI-IO
    from dftune.core.facts.stacks import Stack

    called = "mpi-io: 'mpi.file.open' in the program io.py"  # the program's source calls MPI.File
    forced = diagnose_analysis(a, stack=Stack(software=["mpi", "mpi-io", "posix"], evidence=[called]))
    assert forced.worth_tuning and called in forced.gate.reason


def test_the_programs_own_wait_events_count(tmp_path: Path) -> None:
    p = Proc(pid=7)
    p.open("/scratch/d/train.bin")
    for i in range(30):
        p.app("TorchDataLoader.next", dur=4_000)  # the training loop waits for the next batch
        p.read("/scratch/d/train.bin", 4096, offset=i * 4096, dur=20)
        p.compute(6_000)
    d = diagnose([write_trace(tmp_path / "w", [p])])
    assert d.worth_tuning, d.gate.reason
    waits = next(x for x in d.gate.possibly_io if x.source == "app-waits")
    assert 0.3 < waits.fraction < 0.5
    assert "app-waits" in d.gate.reason and "TorchDataLoader.next" in d.gate.reason


def test_a_stdout_metric_that_is_io_time() -> None:
    metric = SimpleNamespace(kind="stdout_regex", pattern=r"io_time_s ([0-9.]+)", lower_is_better=True)
    got = metric_wait(metric, 0.5, 2.0, ["io_?time"])
    assert got is not None and got.source == "stdout-metric" and got.fraction == 0.25
    loss = SimpleNamespace(kind="stdout_regex", pattern=r"loss ([0-9.]+)", lower_is_better=True)
    assert metric_wait(loss, 0.5, 2.0, ["io_?time"]) is None
    wall = SimpleNamespace(kind="wall_time", pattern=None, lower_is_better=True)
    assert metric_wait(wall, 2.0, 2.0, ["io_?time"]) is None
