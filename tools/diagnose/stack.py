"""Which I/O stack a program runs on, inferred from how it is launched, what it is, and its trace.

A bare spec (a command and a metric) names no library, yet the catalog's L2 settings presume one:
ROMIO hints need MPI-IO on an MPICH-derived MPI, HDF5 properties need HDF5, DataLoader settings need
PyTorch. The evidence, each piece kept as a sentence for the report:

- the launch: ``mpirun``/``mpiexec``/``srun`` in the command, or an MPI launcher in the spec;
- the program itself: the script's source, or the strings of an executable (its dynamic libraries
  ``libmpi``/``libhdf5``, the MPI-IO entry points it calls, environment conventions it reads such as
  IOR's ``IOR_HINT__MPI__<key>=<value>``);
- the trace: the shared libraries and Python packages the processes opened, ranks.

Open MPI's default MPI-IO component (OMPIO) ignores a ROMIO hint file, so ROMIO is only assumed
when nothing points to Open MPI.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: How much of a program file is read for evidence (an executable's strings, a script's source).
READ_LIMIT = 16 << 20
_LAUNCHERS = ("mpirun", "mpiexec", "mpiexec.hydra", "srun", "orterun", "prterun", "flux")
#: IOR reads MPI_Info hints from IOR_HINT__MPI__<key>=<value> (its aiori-MPIIO.c ShowHints/SetHints).
IOR_HINT_PREFIX = "IOR_HINT__MPI__"
_MPIIO_CALLS = ("mpi_file_open", "mpi.file.open", "mpi_file_write", "mpi_file_read", "mpi_file_set_view")
_HDF5 = ("libhdf5", "h5fopen", "h5py", "import h5py", "h5fcreate", "h5pset_fapl_mpio")
_OPENMPI = ("libopen-rte", "libopen-pal", "openmpi", "ompio", "/mca_")
_MPICH = ("libmpich", "mpich", "libromio", "romio", "cray-mpich", "impi", "mvapich")
_FRAMEWORKS = {
    "pytorch": ("import torch", "from torch", "site-packages/torch/"),
    "tensorflow": ("import tensorflow", "from tensorflow", "site-packages/tensorflow/"),
    "dlio": ("dlio_benchmark",),
}


class Stack(BaseModel):
    """The software a run uses, with the evidence for each part."""

    model_config = ConfigDict(extra="forbid")
    mpi: bool = False
    mpiio: bool = False
    #: an MPICH-derived MPI-IO (ROMIO): reads ROMIO_HINTS files and prints hints with ROMIO_PRINT_HINTS
    romio: bool = False
    hdf5: bool = False
    frameworks: list[str] = Field(default_factory=list)
    #: an environment convention the program turns into MPI_Info hints (IOR's), or None
    hint_env_prefix: str | None = None
    evidence: list[str] = Field(default_factory=list)

    def software(self) -> list[str]:
        """The words strategies' ``requires`` are matched against (agents/optimizer/plan.py)."""
        out = {"posix", *self.frameworks}
        if self.mpi:
            out.add("mpi")
        if self.mpiio:
            out.add("mpi-io")
        if self.romio:
            out.add("romio")
        if self.hdf5:
            out.add("hdf5")
        if self.hint_env_prefix == IOR_HINT_PREFIX:
            out.add("ior-hint-env")
        return sorted(out)


def program_files(argv: list[str], cwd: Path) -> list[Path]:
    """The files a command runs: its executable (looked up on PATH) and every argument naming a file."""
    out: list[Path] = []
    for i, arg in enumerate(argv):
        if not arg or arg.startswith("-"):
            continue
        p = Path(arg) if Path(arg).is_absolute() else cwd / arg
        if p.is_file():
            out.append(p)
        elif i == 0 and "/" not in arg and (found := shutil.which(arg)):
            out.append(Path(found))
    return list(dict.fromkeys(out))


def read_program(path: Path) -> str:
    """A program file as lowercase text (an executable's bytes as latin-1: its strings are in there)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(READ_LIMIT).decode("latin-1").lower()
    except OSError:
        return ""


def _trace_texts(analysis: Any) -> list[str]:
    if analysis is None:
        return []
    views = getattr(analysis, "views", {}) or {}
    texts = [str(r.get("path") or "") for r in (views.get("file") or {}).get("rows", [])]
    texts += [str(r.get("cmd") or "") for r in (views.get("proc") or {}).get("rows", [])]
    texts += [f"{e.cat} {e.name}" for e in getattr(analysis, "app_events", [])[:200]]
    return [t.lower() for t in texts]


def traced_commands(analysis: Any) -> list[list[str]]:
    """The command lines of the traced processes (``;``-joined argv in the proc view): what a launch
    script or a launcher actually started, which the spec's own command may not name."""
    views = getattr(analysis, "views", {}) or {} if analysis is not None else {}
    cmds = {str(r.get("cmd") or "") for r in (views.get("proc") or {}).get("rows", [])}
    return [c.split(";") for c in sorted(cmds) if c]


def _ranks(analysis: Any) -> bool:
    views = getattr(analysis, "views", {}) or {} if analysis is not None else {}
    return any(r.get("rank") is not None for r in (views.get("proc") or {}).get("rows", []))


def _first(texts: Iterable[tuple[str, str]], needles: Iterable[str]) -> str | None:
    """Where the first needle is found, as "'needle' in <where>"."""
    needles = list(needles)
    for where, text in texts:
        for n in needles:
            if n in text:
                return f"{n!r} in {where}"
    return None


def infer_stack(
    argv: list[str],
    *,
    cwd: Path,
    launcher: str = "local",
    analysis: Any = None,
    mpi_beside: Path | None = None,
) -> Stack:
    """The stack of a run from its rendered command, its program files (those the command names and
    those the traced processes ran: a launch script's MPI program) and (when traced) its trace.

    ``mpi_beside``: the folder of the Python that launches MPI programs (a pip-installed MPICH puts
    ``mpichversion`` there), evidence of which MPI an ``mpirun`` from the spec starts."""
    files = list(
        dict.fromkeys(
            [
                *program_files(argv, cwd),
                *(f for c in traced_commands(analysis) for f in program_files(c, cwd)),
            ]
        )
    )
    sources = [(f"the program {f.name}", read_program(f)) for f in files]
    trace = [("the trace", " ".join(_trace_texts(analysis)))]
    everything = [*sources, *trace, ("the command", " ".join(argv).lower())]
    evidence: list[str] = []
    s = Stack()

    launch = next((a for a in argv if Path(a).name in _LAUNCHERS), None)
    if launch or launcher in ("mpirun", "slurm", "flux"):
        s.mpi = True
        evidence.append(f"launched by {Path(launch).name if launch else launcher} (MPI ranks)")
    if why := _first(everything, ("libmpi", "mpi4py", "mpi_init", "libpmpi")):
        s.mpi = True
        evidence.append(f"MPI: {why}")
    if _ranks(analysis):
        s.mpi = True
        evidence.append("MPI: the trace's processes carry ranks")
    if why := _first(everything, _MPIIO_CALLS):
        s.mpiio = s.mpi = True
        evidence.append(f"MPI-IO: {why}")
    if why := _first(everything, ("ior_hint__",)):
        s.hint_env_prefix = IOR_HINT_PREFIX
        s.mpiio = s.mpiio or s.mpi
        evidence.append(
            f"MPI_Info hints from the environment as IOR reads them ({IOR_HINT_PREFIX}<key>): {why}"
        )
    elif any(Path(a).name == "ior" for a in argv[:1]) or any(f.name == "ior" for f in files):
        s.hint_env_prefix = IOR_HINT_PREFIX
        s.mpiio = s.mpiio or s.mpi
        evidence.append(f"IOR: reads MPI_Info hints from {IOR_HINT_PREFIX}<key>=<value>")
    if s.mpiio:
        openmpi = _first(everything, _OPENMPI)
        mpich = _first(everything, _MPICH)
        if mpich is None and mpi_beside is not None and (mpi_beside / "mpichversion").exists():
            mpich = f"mpichversion beside {mpi_beside}"
        if openmpi and not mpich:
            evidence.append(f"Open MPI ({openmpi}): its OMPIO ignores ROMIO hint files")
        else:
            s.romio = True
            evidence.append(f"ROMIO: {mpich}" if mpich else "ROMIO assumed (no sign of Open MPI's OMPIO)")
    if why := _first(everything, _HDF5):
        s.hdf5 = True
        evidence.append(f"HDF5: {why}")
    for name, needles in _FRAMEWORKS.items():
        if why := _first(everything, needles):
            s.frameworks.append(name)
            evidence.append(f"{name}: {why}")
    s.evidence = evidence
    return s


def hints_printed(text: str) -> list[dict[str, str]]:
    """The hint blocks ROMIO prints at each MPI_File_open with ROMIO_PRINT_HINTS=1 (``key = K value = V``)."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for m in re.finditer(r"^key = (\S+)\s+value = (.*?)\s*$", text, flags=re.MULTILINE):
        key, value = m.group(1), m.group(2)
        if key in current:  # a key again: the next open's block
            blocks.append(current)
            current = {}
        current[key] = value
    if current:
        blocks.append(current)
    return blocks


def overridden(requested: dict[str, str], blocks: list[dict[str, str]]) -> dict[str, set[str]]:
    """Requested hints some open did not get: key -> the values in effect instead."""
    out: dict[str, set[str]] = {}
    for block in blocks:
        for key, want in requested.items():
            got = block.get(key)
            if got is not None and got != want:
                out.setdefault(key, set()).add(got)
    return out


__all__ = ["IOR_HINT_PREFIX", "Stack", "hints_printed", "infer_stack", "overridden", "program_files"]
