"""Which I/O stack a program runs on: the evidence gathered from how it is launched, what it is,
and its trace, judged by :func:`dftune.core.facts.stacks.detect` (resources/facts/stacks.toml).

A bare spec (a command and a metric) names no library, yet the catalog's L2 settings presume one:
ROMIO hints need MPI-IO on an MPICH-derived MPI, HDF5 properties need HDF5, DataLoader settings need
PyTorch. What is looked at, each piece kept as a sentence for the report:

- the launch: the spec's launcher, and the programs the command runs (an MPI launcher's name);
- the program itself: the script's source, or the strings of an executable (its dynamic libraries,
  the MPI-IO entry points it calls, environment conventions it reads such as IOR's hint variables);
- the trace: the files the processes opened, their commands and ranks, application events and the
  I/O layers.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
from pathlib import Path
from typing import Any

from dftune.core.facts import stack_facts
from dftune.core.facts.stacks import Evidence, Stack, detect, python_imports

#: How much of a program file is read for evidence (an executable's strings, a script's source).
READ_LIMIT = 16 << 20


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
    """A program file as lowercase text (an executable's bytes as latin-1: its strings are in there);
    a Python script's imports also one per line (``import numpy as np, zarr`` imports zarr)."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(READ_LIMIT).decode("latin-1")
    except OSError:
        return ""
    return (text + "\n" + python_imports(text) if path.suffix == ".py" else text).lower()


def _trace_texts(analysis: Any) -> list[str]:
    if analysis is None:
        return []
    views = getattr(analysis, "views", {}) or {}
    skip = stack_facts().not_evidence.globs
    paths = (str(r.get("path") or "") for r in (views.get("file") or {}).get("rows", []))
    texts = [p for p in paths if not any(fnmatch.fnmatchcase(p, g) for g in skip)]
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


def trace_evidence(analysis: Any) -> Evidence:
    """What a trace alone shows (``dftune diagnose`` of a trace read without its run)."""
    ev = Evidence(ranks=_ranks(analysis))
    if analysis is None:
        return ev
    ev.texts = [("the trace", " ".join(_trace_texts(analysis)))]
    ev.layers = [layer.cat for layer in getattr(analysis, "layers", []) if layer.count]
    ev.executables = [Path(c[0]).name for c in traced_commands(analysis) if c and c[0]]
    io = {
        x.cat.upper(): x.time_s
        for x in getattr(analysis, "layers", [])
        if x.cat.upper() in ("POSIX", "STDIO")
    }
    ev.stdio_share = io.get("STDIO", 0.0) / sum(io.values()) if sum(io.values()) > 0 else None
    return ev


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
    ev = trace_evidence(analysis)
    files = list(
        dict.fromkeys(
            [
                *program_files(argv, cwd),
                *(f for c in traced_commands(analysis) for f in program_files(c, cwd)),
            ]
        )
    )
    ev.texts = [
        *((f"the program {f.name}", read_program(f)) for f in files),
        *ev.texts,
        ("the command", " ".join(argv).lower()),
    ]
    ev.executables = [*(Path(a).name for a in argv if a and not a.startswith("-")), *ev.executables]
    ev.launcher, ev.beside = launcher, mpi_beside
    return detect(ev)


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
