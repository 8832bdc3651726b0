"""A bare spec of an MPI-IO program that only reads: its set-up writes an input beside it, and two
ranks read their interleaved 2 KiB pieces of it through a strided file view with independent
calls, twice. ROMIO's data sieving reads whole windows, the other rank's pieces included.

Turning sieving off must be judged by its numbers: the experiment reads half the bytes in
smaller calls, and both are the windows' holes, not less data. Every arm runs in its own folder
and the hint sets are files dftune writes, so neither may read as "other data files".
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest

pytestmark = pytest.mark.e2e

MAKE_INPUT = textwrap.dedent("""
    import os, sys
    os.makedirs(sys.argv[1], exist_ok=True)
    with open(os.path.join(sys.argv[1], "in.dat"), "wb") as f:
        f.write(os.urandom(2048 * 2048 * 2))
""")

READER = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    from mpi4py import MPI
    a = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    block, count = 2048, 2048
    view = MPI.BYTE.Create_vector(count, block, block * size).Commit()
    comm.Barrier()
    t = time.perf_counter()
    fh = MPI.File.Open(comm, os.path.join(a["--data"], "in.dat"), MPI.MODE_RDONLY)
    fh.Set_view(rank * block, MPI.BYTE, view)
    back = np.empty(block * count, dtype=np.uint8)
    total = 0
    for _ in range(int(a["--passes"])):
        fh.Read_at(0, back)
        total += int(back.sum())
    fh.Close()
    comm.Barrier()
    if rank == 0:
        print(f"io_time_s {time.perf_counter() - t:.6f}")
""")

SPEC = textwrap.dedent("""
    name = "strided-input-reader"
    setup = ["{python}", "make_input.py", "{workdir}/input"]
    command = ["{python}", "reader.py", "--data", "{workdir}/input", "--passes", "2"]
    replicates = 3
    timeout_s = 120
    [launcher]
    kind = "mpirun"
    ranks = 2
    [metric]
    kind = "stdout_regex"
    pattern = 'io_time_s ([0-9.]+)'
""")


def test_sieving_off_on_a_read_only_input_is_judged_by_its_numbers(tmp_path: Path) -> None:
    c.needs_traced_mpi()
    files = {"make_input.py": MAKE_INPUT, "reader.py": READER, "workload.toml": SPEC}
    doc = c.tune_in(tmp_path, files, experiments=2)
    verdicts = {v["proposal"]: v["verdict"] for v in doc["verdicts"]}
    ds_off = "romio-romio_ds_write=disable-romio_ds_read=disable"
    assert ds_off in verdicts, verdicts
    assert all(v != "rejected" for v in verdicts.values()), verdicts
    report = (Path(doc["run_dir"]) / "report.md").read_text()
    assert "no longer reads" not in report and "data files the incumbent never reads" not in report
    said = [line[:600] for line in report.splitlines() if "romio_ds_read=disable" in line][:4]
    assert "sieving windows read between each process's own pieces" in report, (verdicts, said)
