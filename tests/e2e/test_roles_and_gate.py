"""Process roles, start-up reads and the worth-tuning gate
on programs written for them, under the real dftracer.

- a DataLoader-style reader (a main process and ``multiprocessing`` workers, one rank) diagnoses
  like its single-process equivalent: no imbalance between the main process and its workers;
- a checkpoint writer started directly and through a bash launch script both diagnose
  ``write-time``, and so does a program whose interpreter start-up reads (numpy, json, email,
  ...) outweigh its modest data writes, with the start-up reads set apart and listed;
- an MPI-IO program whose time goes into collectives (rank 0 computes between collective
  writes, rank 1 waits inside ``MPI_File_write_all``) passes the gate, which says why.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest

from dftune.core.domain.diagnosis import Diagnosis
from dftune.tools.diagnose.engine import diagnose

# one xdist worker runs the module: its module fixture (real runs, traced) is then made once,
# not once on each worker that receives one of its tests
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("roles")]
TIMEOUT_S = 180

LOADER = textwrap.dedent(
    """
    import multiprocessing as mp, os, sys
    CHUNK, CHUNKS = 1 << 17, 256
    path = os.path.join(sys.argv[1], "train.bin")

    fd = None

    def load(i):  # each process opens the file once, as a dataset's reader does
        global fd
        if fd is None:
            fd = os.open(path, os.O_RDONLY)
        return sum(os.pread(fd, CHUNK, i * CHUNK)[::4096])

    def step(x):  # the training step: CPU work on each batch
        return sum(range(20000)) + x

    if __name__ == "__main__":
        workers = int(sys.argv[2])  # the data file is written before the traced run
        if workers:
            # spawn (DataLoader's multiprocessing_context="spawn"): a forked child leaves through
            # os._exit, which skips dftracer's finalizer and leaves its trace file empty
            pool = mp.get_context("spawn").Pool(workers)
            total = sum(step(x) for x in pool.imap(load, range(CHUNKS), chunksize=8))
            pool.close()
            pool.join()
        else:
            total = sum(step(load(i)) for i in range(CHUNKS))
        print("total", total)
    """
)
CHECKPOINT = textwrap.dedent(
    """
    import os, sys
    {imports}
    path = os.path.join(sys.argv[1], "ckpt.bin")
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_DSYNC, 0o644)  # each block on the device
    block = os.urandom({size})
    for _ in range({count}):
        os.write(fd, block)
    os.fsync(fd)
    os.close(fd)
    """
)
HEAVY_IMPORTS = "import json, email.parser, http.client, decimal, fractions, xml.dom.minidom, sqlite3, numpy"
LAUNCH = '#!/bin/bash\necho start $(date)\ncd "$(dirname "$0")"\n{python} prog.py "$1"\necho done\n'
MPI_COLLECTIVES = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    fh = MPI.File.Open(comm, os.path.join(sys.argv[1], "state.dat"), MPI.MODE_CREATE | MPI.MODE_WRONLY)
    rec = np.full(256, rank, dtype=np.uint8)
    for step in range(150):
        if rank == 0:
            time.sleep(0.004)  # rank 0 is late to every collective: rank 1 waits inside it
        fh.Write_at_all((step * size + rank) * rec.nbytes, rec)
    fh.Close()
    comm.Barrier()
    if rank == 0:
        print("steps 150")
    """
)


def _env(trace_dir: Path) -> dict[str, str]:
    lib = c.dftracer_preload_lib()
    assert lib is not None
    env = c._clean_env()
    env.update(
        DFTRACER_ENABLE="1",
        DFTRACER_INIT="PRELOAD",
        DFTRACER_INC_METADATA="1",
        DFTRACER_LOG_FILE=str(trace_dir / "trace"),
        DFTRACER_DATA_DIR="all",
        LD_PRELOAD=str(lib),
    )
    return env


def _traced(argv: list[str], base: Path, name: str, data_file: int = 0) -> Path:
    """Run ``argv`` under dftracer ({data} is its data
    folder, holding ``train.bin`` of ``data_file`` bytes)."""
    trace = base / name / "trace"
    data = base / name / "data"
    trace.mkdir(parents=True)
    data.mkdir(parents=True)
    if data_file:  # written, then dropped from the page cache: the traced reads go to the device
        fd = os.open(data / "train.bin", os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, os.urandom(data_file))
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    proc = subprocess.Popen(
        [*argv[:1], *(a.format(data=data) for a in argv[1:])],
        cwd=str(argv_dir(argv)),
        env=_env(trace),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    c.wait_for_traced([(name, trace, proc)], TIMEOUT_S)
    return trace


def argv_dir(argv: list[str]) -> Path:
    script = next((Path(a) for a in argv if a.endswith((".py", ".sh"))), None)
    return script.parent if script is not None else Path.cwd()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if c.dftracer_preload_lib() is None:
        pytest.skip("dftracer (with libdftracer_preload.so) is not installed")
    return tmp_path_factory.mktemp("roles")


def _program(folder: Path, text: str, launch: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prog.py").write_text(text)
    if launch:
        (folder / "run.sh").write_text(LAUNCH.format(python=sys.executable))
    return folder


def _cats(d: Diagnosis) -> set[str]:
    return {b.category for b in d.bottlenecks}


def test_dataloader_style_reader_diagnoses_like_one_process(base: Path) -> None:
    prog = _program(base / "loader", LOADER) / "prog.py"
    multi = diagnose([_traced([sys.executable, str(prog), "{data}", "2"], base, "multi", 1 << 25)])
    single = diagnose([_traced([sys.executable, str(prog), "{data}", "0"], base, "single", 1 << 25)])
    assert multi.app_processes >= 3, multi.helper_processes
    assert not _cats(multi) & {"imbalance", "stragglers"}, [b.evidence for b in multi.bottlenecks]
    assert multi.bottlenecks[0].category == single.bottlenecks[0].category, (
        [b.evidence for b in multi.bottlenecks[:3]],
        [b.evidence for b in single.bottlenecks[:3]],
    )


def test_checkpoint_writer_direct_and_through_a_launch_script(base: Path) -> None:
    folder = _program(
        base / "ckpt", CHECKPOINT.format(imports="import json", size=1 << 20, count=24), launch=True
    )
    direct = diagnose([_traced([sys.executable, str(folder / "prog.py"), "{data}"], base, "ckpt-direct")])
    script = diagnose([_traced(["bash", str(folder / "run.sh"), "{data}"], base, "ckpt-bash")])
    for d in (direct, script):
        assert d.bottlenecks[0].category == "write-time", [b.evidence for b in d.bottlenecks[:3]]
        assert any(s.path_class == "runtime" for s in d.set_apart)
    assert script.helper_processes  # bash and its children are listed, not judged


def test_heavy_startup_reads_do_not_decide_a_writer(base: Path) -> None:
    pytest.importorskip("numpy")
    folder = _program(
        base / "heavy", CHECKPOINT.format(imports=HEAVY_IMPORTS, size=1 << 20, count=16), launch=True
    )
    for name, argv in (
        ("heavy-direct", [sys.executable, str(folder / "prog.py"), "{data}"]),
        ("heavy-bash", ["bash", str(folder / "run.sh"), "{data}"]),
    ):
        d = diagnose([_traced(argv, base, name)])
        runtime = next(s for s in d.set_apart if s.path_class == "runtime")
        assert runtime.read_count > 100 and runtime.files > 50, runtime  # numpy's .py and .so files
        assert d.bottlenecks[0].category == "write-time", [b.evidence for b in d.bottlenecks[:3]]
        assert any("start-up" in n for n in d.notes)


def test_mpiio_program_whose_time_is_in_collectives_passes_the_gate(base: Path) -> None:
    why = c.mpi_unavailable()
    if why:
        pytest.skip(why)
    from dftune.tools.runner.bench import find_mpirun

    prog = _program(base / "mpi", MPI_COLLECTIVES) / "prog.py"
    trace = _traced([find_mpirun(), "-n", "2", sys.executable, str(prog), "{data}"], base, "mpi")
    d = diagnose([trace])
    assert d.worth_tuning, d.gate.reason
    mpi = next(p for p in d.gate.possibly_io if p.source == "mpi-collectives")
    assert mpi.fraction >= d.gate.min_io_fraction > d.io_fraction  # the traced I/O alone would stop it
    assert "mpi-collectives" in d.gate.reason and "written by all 2 ranks" in d.gate.reason
    assert "start-up and system file I/O" in d.gate.reason  # mpi4py's and numpy's imports are no data I/O
