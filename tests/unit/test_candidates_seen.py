"""Candidate fixes are narrowed to the interfaces and libraries the trace shows (as Drishti narrows
its recommendations to the modules a Darshan log holds): no STDIO fix for a job without STDIO, no
HDF5, netCDF or ROMIO fix for a loader that reads plain files."""

from __future__ import annotations

import json
from pathlib import Path

from dftune.core.facts.stacks import detect
from dftune.tools.catalog import default_catalog
from dftune.tools.diagnose.engine import misfit
from dftune.tools.diagnose.stack import trace_evidence
from dftune.tools.trace import analyze
from dftune.tools.trace.model import Analysis


def _trace(tmp_path: Path, calls: list[tuple[str, str, str]]) -> Path:
    """A legacy dftracer trace: one process reading ``(cat, name, file)`` calls of 4 KiB."""
    lines = ["["]
    for i, (cat, name, fname) in enumerate(calls):
        args = {"hostname": "h", "fname": fname, "ret": 4096 if "read" in name else 3}
        lines.append(
            json.dumps(
                {
                    "id": str(i),
                    "name": name,
                    "cat": cat,
                    "pid": "7",
                    "tid": "7",
                    "ts": str(1_000_000 + 100 * i),
                    "dur": "50",
                    "ph": "X",
                    "args": args,
                }
            )
        )
    path = tmp_path / "t.pfw"
    path.write_text("\n".join(lines) + "\n")
    return path


def _fits(strategy: str, trace: Path) -> str | None:
    a = analyze([trace], views=["file", "proc"])
    return misfit(default_catalog().strategies[strategy], a, detect(trace_evidence(a)))


def library_evidence(a: Analysis) -> set[str]:
    """The I/O libraries and interfaces the run's stack shows, from the trace alone."""
    return set(detect(trace_evidence(a)).software) & {"stdio", "hdf5", "netcdf", "mpi-io"}


def test_plain_posix_reads_get_no_stdio_hdf5_netcdf_or_romio_fix(tmp_path: Path) -> None:
    t = _trace(tmp_path, [("POSIX", "open", "/d/a.bin")] + [("POSIX", "read", "/d/a.bin")] * 20)
    assert library_evidence(analyze([t], views=["file"])) == set()
    for sid in ("l1.stdio_to_lower_level", "l2.hdf5_chunk_cache", "l2.netcdf_collective"):
        assert _fits(sid, t) is not None, sid
    assert "STDIO" in (_fits("l1.stdio_to_lower_level", t) or "")
    assert _fits("l1.read_buffering", t) is None  # a fix of plain small reads still fits


def test_what_the_trace_shows_is_offered(tmp_path: Path) -> None:
    t = _trace(
        tmp_path,
        [
            ("STDIO", "fopen", "/d/run.nc"),
            *[("STDIO", "fread", "/d/run.nc")] * 10,
            ("POSIX", "open", "/d/x.h5"),
            *[("POSIX", "read", "/d/x.h5")] * 10,
        ],
    )
    seen = library_evidence(analyze([t], views=["file"]))
    assert seen == {"stdio", "netcdf", "hdf5"}
    assert _fits("l1.stdio_to_lower_level", t) is None
    assert _fits("l2.hdf5_chunked_layout", t) is None
    assert _fits("l2.netcdf_classic_format", t) is None
    assert "ROMIO" in (_fits("l2.romio_cb", t) or "")


def test_a_few_stdio_calls_of_a_runtime_are_no_stdio_workload(tmp_path: Path) -> None:
    t = _trace(
        tmp_path,
        [("STDIO", "fopen", "/etc/conf"), ("STDIO", "fgets", "/etc/conf")]
        + [("POSIX", "read", "/d/a.bin")] * 40,
    )
    assert "stdio" not in library_evidence(analyze([t], views=["file"]))
    assert "STDIO" in (_fits("l1.stdio_to_lower_level", t) or "")


def test_romio_tuning_needs_mpi_io_not_just_mpi(tmp_path: Path) -> None:
    mpi = [
        ("POSIX", "open", "/usr/lib/libmpi.so.40"),
        ("POSIX", "open", "/d/x.h5"),
        *[("POSIX", "read", "/d/x.h5")] * 5,
    ]
    t = _trace(tmp_path, mpi)
    assert "ROMIO" in (_fits("l2.romio_cb", t) or "")  # an MPI job reading HDF5 files: no sign of ROMIO
    assert _fits("l1.mpiio_collective_calls", t) is None  # moving an MPI job to MPI-IO presumes only MPI
    romio = tmp_path / "romio"
    romio.mkdir()
    t2 = _trace(romio, [*mpi, ("POSIX", "open", "/usr/lib/openmpi/mca_io_romio321.so")])
    assert _fits("l2.romio_cb", t2) is None
