"""What the diagnosis judges: the program's own data I/O, with start-up and system reads set apart.

Why: every Python program reads its interpreter's libraries, shared objects and ``/etc`` at
start-up, and MPI and GPU runtimes read ``/proc``, ``/sys`` and ``/dev``.  On a busy machine
those reads can outweigh a checkpoint writer's writes and name ``read-time`` its top
bottleneck.  Darshan and Drishti leave system paths out of their reports; here the path
classes of :mod:`dftune.tools.trace.paths` decide what is set apart: system paths unless
asked for, and the runtime's own files whenever the program does data I/O of its own.  What
is set apart is listed with its numbers, never hidden.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from dftune.tools.trace.model import Analysis, PathClassStats
from dftune.tools.trace.paths import DATA, RUNTIME, SYSTEM

_WHY = {
    SYSTEM: "system pseudo-files (/proc, /sys, /dev) that runtimes read about the machine; "
    "--include-system-paths includes them",
    RUNTIME: "the interpreter's and libraries' own files (lib dirs, site-packages, shared objects, /etc) "
    "read at start-up; the program does data I/O of its own, which decides the diagnosis",
}


class SetApart(BaseModel):
    """I/O of one path class the diagnosis does not judge, with why."""

    model_config = ConfigDict(extra="forbid")
    path_class: str
    files: int
    read_count: int
    read_bytes: int
    write_count: int
    write_bytes: int
    metadata_count: int
    io_time_s: float
    example: str | None = None
    why: str


def excluded_classes(analysis: Analysis) -> list[str]:
    """The path classes left out of the diagnosis of this analysis (none without a file view)."""
    classes = analysis.path_classes
    if not classes:
        return []
    out = [] if analysis.system_paths_included else [SYSTEM]
    data = classes.get(DATA)
    if data is not None and (data.read_count + data.write_count) > 0:
        out.append(RUNTIME)
    return [c for c in out if c in classes]


def set_apart(analysis: Analysis) -> list[SetApart]:
    out = []
    for cls in excluded_classes(analysis):
        s = analysis.path_classes[cls]
        out.append(
            SetApart(
                path_class=cls,
                files=s.files,
                read_count=s.read_count,
                read_bytes=s.read_bytes,
                write_count=s.write_count,
                write_bytes=s.write_bytes,
                metadata_count=s.metadata_count,
                io_time_s=round(s.io_time_s, 6),
                example=s.example,
                why=_WHY[cls],
            )
        )
    return out


def _frac(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def data_summary(summary: dict[str, Any], analysis: Analysis) -> dict[str, Any]:
    """The summary metrics with the excluded classes' calls, bytes and times taken out.

    Exact for counts, bytes, times and their shares (the per-path tables hold them); the
    size-bin and alignment counts have no per-path split and still include every path."""
    gone = [analysis.path_classes[c] for c in excluded_classes(analysis)]
    if not gone:
        return summary
    out = dict(summary)

    def less(key: str, attr: str, scale: float = 1.0) -> None:
        out[key] = max(0.0, float(out[key]) - scale * sum(float(getattr(s, attr)) for s in gone))

    for fam in ("read", "write", "metadata"):
        less(f"{fam}_count", f"{fam}_count")
        less(f"{fam}_time_s", f"{fam}_time_s")
    for fam in ("read", "write"):
        less(f"{fam}_bytes", f"{fam}_bytes")
    for key in ("read_count", "write_count", "metadata_count", "read_bytes", "write_bytes"):
        out[key] = int(out[key])
    rwm = out["read_time_s"] + out["write_time_s"] + out["metadata_time_s"]
    out["io_time_s"] = rwm
    for fam in ("read", "write", "metadata"):
        out[f"{fam}_time_frac"] = _frac(out[f"{fam}_time_s"], rwm)
    for fam in ("read", "write"):
        mean = _frac(out[f"{fam}_bytes"], out[f"{fam}_count"]) if out[f"{fam}_count"] else None
        out[f"{fam}_mean_xfer"] = mean if mean is not None else float("inf")
        out[f"{fam}_mean_xfer_kib"] = (mean or 0.0) / 1024
    seq_gone = sum(s.sequential for s in gone)
    rand_gone = sum(s.random for s in gone)
    out["random_count"] = max(0, int(out["random_count"]) - rand_gone)
    out["classified"] = max(0, int(out["classified"]) - seq_gone - rand_gone)
    out["rand_frac"] = _frac(out["random_count"], out["classified"])
    return out


def data_rows(rows: list[dict[str, Any]], analysis: Analysis) -> list[dict[str, Any]]:
    """File-view rows the diagnosis judges (rows of excluded classes left out)."""
    gone = set(excluded_classes(analysis))
    return [r for r in rows if r.get("path_class", DATA) not in gone]


def judged_io_time(analysis: Analysis) -> float | None:
    """Read + write + metadata + sync time of the classes judged (None without per-path totals)."""
    if not analysis.path_classes:
        return None
    gone = set(excluded_classes(analysis))
    return sum(s.io_time_s for c, s in analysis.path_classes.items() if c not in gone)


def describe(items: list[SetApart]) -> list[str]:
    """One line per class set apart, for the diagnosis's notes."""
    lines = []
    for s in items:
        calls = s.read_count + s.write_count + s.metadata_count
        lines.append(
            f"set apart: {s.files:,} {s.path_class} file(s), {calls:,} calls, {s.io_time_s:.3g} s of "
            f"I/O time (e.g. {s.example}): {s.why}"
        )
    return lines


__all__ = [
    "PathClassStats",
    "SetApart",
    "data_rows",
    "data_summary",
    "describe",
    "excluded_classes",
    "set_apart",
]
