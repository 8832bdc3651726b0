"""``dftune doctor``: the installer agent alone, plus what the machine offers the examples.

Is dftracer usable here, what does it trace and not trace (the smoke program's pitfalls),
are MPI and HDF5 present, and which filesystem holds each data directory.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import tempfile
from pathlib import Path
from typing import Any

from dftune.agents.installer import check_tracer
from dftune.tools.diagnose.fs import detect

SCHEMA = "dftune.doctor/1"


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def doctor(data_dirs: list[Path] | None = None, *, allow_install: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dftune-doctor-") as scratch:
        tracer, pitfalls = check_tracer(Path(scratch), allow_install=allow_install)
    software = {
        "dftracer": _version("dftracer"),
        "mpirun": shutil.which("mpirun"),
        "mpi4py": _version("mpi4py"),
        "h5py": _version("h5py"),
        "hdf5": _hdf5_version(),
        "torch": _version("torch"),
    }
    fs = [detect(d).model_dump() for d in data_dirs or []]
    problems = [] if tracer.usable else [f"dftracer is not usable: {tracer.reason}"]
    problems += [w["warning"] for w in fs if w.get("warning")]
    return {"schema": SCHEMA, "ok": not problems, "tracer": tracer.model_dump(mode="json"),
            "pitfalls": [p.model_dump() for p in pitfalls], "software": software, "filesystems": fs,
            "problems": problems}  # fmt: skip


def _hdf5_version() -> str | None:
    if importlib.util.find_spec("h5py") is None:
        return None
    import h5py

    return str(h5py.version.hdf5_version)
