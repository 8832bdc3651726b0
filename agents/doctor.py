"""``dftune doctor``: the installer agent alone, plus what the machine offers the examples.

Is dftracer usable here, what does it trace and not trace (the smoke program's pitfalls),
are MPI and HDF5 present, and which filesystem holds each data directory.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from dftune.agents.installer import check_tracer
from dftune.core.errors import DftuneError
from dftune.tools.diagnose.fs import detect
from dftune.tools.runner.bench import find_mpirun

SCHEMA = "dftune.doctor/1"


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


class DoctorError(DftuneError):
    """An input of ``dftune doctor`` names nothing that exists (one line, naming it)."""


def mpi_launcher() -> dict[str, Any]:
    """The ``mpirun`` the runner would launch with (the one beside this Python first, then PATH)."""
    found = find_mpirun()
    path = shutil.which(found) if not Path(found).is_absolute() else found
    if path is None:
        return {"path": None, "where": "no mpirun beside the Python running dftune nor on PATH"}
    beside = Path(path).parent == Path(sys.executable).parent
    return {"path": path, "where": "beside the Python running dftune" if beside else "first on PATH"}


def doctor(data_dirs: list[Path] | None = None, *, allow_install: bool = False) -> dict[str, Any]:
    for d in data_dirs or []:  # checked before the (slow) smoke program: a typo is not a filesystem
        if not d.exists():
            raise DoctorError(f"--data-dir {d}: no such file or directory")
        if not d.is_dir():
            raise DoctorError(f"--data-dir {d}: not a directory")
    launcher = mpi_launcher()
    with tempfile.TemporaryDirectory(prefix="dftune-doctor-") as scratch:
        tracer, pitfalls = check_tracer(Path(scratch), allow_install=allow_install)
    software = {
        "dftracer": _version("dftracer"),
        "mpirun": launcher["path"],
        "mpi4py": _version("mpi4py"),
        "h5py": _version("h5py"),
        "hdf5": _hdf5_version(),
        "torch": _version("torch"),
    }
    fs = [detect(d).model_dump() for d in data_dirs or []]
    problems = [] if tracer.usable else [f"dftracer is not usable: {tracer.reason}"]
    problems += [w["warning"] for w in fs if w.get("warning")]
    return {
        "schema": SCHEMA,
        "ok": not problems,
        "tracer": tracer.model_dump(mode="json"),
        "pitfalls": [p.model_dump() for p in pitfalls],
        "software": software,
        "mpi_launcher": launcher,
        "filesystems": fs,
        "problems": problems,
    }


def _hdf5_version() -> str | None:
    if importlib.util.find_spec("h5py") is None:
        return None
    import h5py

    return str(h5py.version.hdf5_version)
