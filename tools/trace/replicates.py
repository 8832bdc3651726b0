"""A bench's trace folder holds replicates of one condition (``traces/raw/r0``, ``r1``, ...),
not one job: read together they look like one program with N times the processes, or like
several separate runs. ``dftune analyze`` and ``diagnose`` given such a folder read one replicate,
the one whose trace holds the most (a tracer that lost a thread's last events must not make the
program look as if it did less), and say which."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dftune.tools.trace.discover import is_trace_name

#: a replicate's folder as bench names it
REPLICATE = re.compile(r"r[0-9]+")


@dataclass(frozen=True)
class Chosen:
    """What to read, and the note that says why (empty: the paths as given)."""

    paths: list[Path]
    note: str = ""


def replicate_folders(folder: Path) -> list[Path]:
    """The replicate folders of a bench's trace folder, in replicate order (empty: not one, e.g. a
    folder that also holds trace files of its own or other folders)."""
    if not folder.is_dir():
        return []
    entries = list(folder.iterdir())
    reps = [e for e in entries if e.is_dir() and REPLICATE.fullmatch(e.name)]
    others = [e for e in entries if e not in reps and not e.name.startswith(".")]
    if len(reps) < 2 or others:
        return []
    return sorted(reps, key=lambda p: int(p.name[1:]))


def _trace_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and is_trace_name(p))


def one_replicate(paths: Sequence[Path], verb: str = "reading") -> Chosen:
    """``paths`` as given, unless it is one bench trace folder: then its fullest replicate."""
    if len(paths) != 1:
        return Chosen(list(paths))
    reps = [r for r in replicate_folders(paths[0]) if _trace_bytes(r) > 0]
    if len(reps) < 2:
        return Chosen(list(paths))
    sizes = {r: _trace_bytes(r) for r in reps}
    chosen = max(reps, key=lambda r: (sizes[r], -int(r.name[1:])))
    note = (
        f"{paths[0]} holds {len(reps)} replicates of one bench, not one job: {verb} {chosen.name} "
        f"(the largest trace, {sizes[chosen]:,} bytes); pass {reps[0]} for another"
    )
    return Chosen([chosen], note)
