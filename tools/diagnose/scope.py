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

from dftune.core.domain.diagnosis import SetApart
from dftune.core.facts.paths import DATA, class_why, set_apart_when
from dftune.tools.trace import semantics as S
from dftune.tools.trace.model import Analysis, Shape


def excluded_classes(analysis: Analysis) -> list[str]:
    """The path classes left out of the diagnosis of this analysis (none without a file view): the
    system's unless included, and the runtime's, launchers', tools' and configuration's whenever
    the program does data I/O of its own (each class's ``set_apart`` in resources/facts/paths.toml)."""
    classes = analysis.path_classes
    if not classes:
        return []
    data = classes.get(DATA)
    has_data = data is not None and (data.read_count + data.write_count) > 0
    out = []
    for cls in classes:
        when = set_apart_when(cls)
        if (when == "always" and not analysis.system_paths_included) or (when == "with_data" and has_data):
            out.append(cls)
    return sorted(out)


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
                why=_why(cls),
            )
        )
    return out


#: Below this share of calls naming a file, the per-path totals do not stand for the job's I/O
#: (dftracer's aggregated records name none): the excluded classes are subtracted instead.
MOSTLY_NAMED = 0.5


def _frac(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def data_summary(summary: dict[str, Any], analysis: Analysis) -> dict[str, Any]:
    """The summary metrics of the files judged: the judged classes' calls, bytes and times.

    Calls on no file (a parent's ``waitpid`` on its workers, pipes, sockets) are no file I/O, as
    Darshan counts none; the excluded classes' calls are set apart.  Exact for counts, bytes,
    times and their shares (the per-path tables hold them); the size-bin and alignment counts
    have no per-path split and still include every call."""
    classes = analysis.path_classes
    if not classes:
        return summary
    gone = set(excluded_classes(analysis))
    kept = [s for c, s in classes.items() if c not in gone]
    out = dict(summary)
    named = sum(s.read_count + s.write_count + s.metadata_count for s in classes.values())
    calls = sum(int(summary[f"{f}_count"]) for f in ("read", "write", "metadata"))
    if named < MOSTLY_NAMED * calls:  # most calls name no file (aggregated records): take the excluded out
        families = {
            "read": ("count", "time_s", "bytes"),
            "write": ("count", "time_s", "bytes"),
            "metadata": ("count", "time_s"),
        }
        for fam, keys in families.items():
            for k in keys:
                less = sum(getattr(s, f"{fam}_{k}") for c, s in classes.items() if c in gone)
                out[f"{fam}_{k}"] = max(0, out[f"{fam}_{k}"] - less)
    else:
        for fam in ("read", "write", "metadata"):
            out[f"{fam}_count"] = sum(getattr(s, f"{fam}_count") for s in kept)
            out[f"{fam}_time_s"] = sum(getattr(s, f"{fam}_time_s") for s in kept)
        for fam in ("read", "write"):
            out[f"{fam}_bytes"] = sum(getattr(s, f"{fam}_bytes") for s in kept)
    rwm = out["read_time_s"] + out["write_time_s"] + out["metadata_time_s"]
    out["io_time_s"] = rwm
    for fam in ("read", "write", "metadata"):
        out[f"{fam}_time_frac"] = _frac(out[f"{fam}_time_s"], rwm)
    for fam in ("read", "write"):
        mean = _frac(out[f"{fam}_bytes"], out[f"{fam}_count"]) if out[f"{fam}_count"] else None
        out[f"{fam}_mean_xfer"] = mean if mean is not None else float("inf")
        out[f"{fam}_mean_xfer_kib"] = (mean or 0.0) / 1024
    out["random_count"] = sum(s.random for s in kept)
    out["classified"] = sum(s.sequential + s.random for s in kept)
    out["rand_frac"] = _frac(out["random_count"], out["classified"])
    return out


def unattributed(summary: dict[str, Any], analysis: Analysis) -> str | None:
    """A note on the calls on no file (left out of the judged totals), or None."""
    classes = analysis.path_classes.values()
    if not classes:
        return None
    calls = sum(int(summary[f"{f}_count"]) for f in ("read", "write", "metadata")) - sum(
        s.read_count + s.write_count + s.metadata_count for s in classes
    )
    secs = sum(float(summary[f"{f}_time_s"]) for f in ("read", "write", "metadata")) - sum(
        s.read_time_s + s.write_time_s + s.metadata_time_s for s in classes
    )
    if calls <= 0:
        return None
    return (
        f"{calls:,} calls on no file ({max(secs, 0.0):.3g} s: waitpid on child processes, pipes, sockets) "
        "are not file I/O and are not judged"
    )


def data_shape(summary: dict[str, Any], analysis: Analysis) -> Shape:
    """The I/O shape of the files judged (a writer's 1 MiB blocks are not averaged with the 8 KiB
    reads of its interpreter's start-up), or the analysis's own shape when nothing is set apart."""
    if not excluded_classes(analysis):
        return analysis.shape
    ops = int(summary["read_count"]) + int(summary["write_count"])
    nbytes = int(summary["read_bytes"]) + int(summary["write_bytes"])
    if not ops:
        return Shape(kind="none", reason="no read/write operation on the program's own files")
    mean = nbytes / ops
    if mean < S.OP_COUNT_BOUND_BYTES:
        kind, why = "op-count-bound", f"mean transfer {mean:,.0f} B < {S.OP_COUNT_BOUND_BYTES // 1024} KiB"
    elif mean >= S.BANDWIDTH_BOUND_BYTES:
        kind, why = "bandwidth-bound", f"mean transfer {mean / (1 << 20):,.1f} MiB >= 1 MiB"
    else:
        kind, why = "mixed", f"mean transfer {mean / 1024:,.0f} KiB between 64 KiB and 1 MiB"
    return Shape(
        kind=kind,
        ops=ops,
        bytes=nbytes,
        mean_xfer_bytes=mean,
        reason=f"{why} on the program's own files (start-up and system file I/O set apart)",
    )


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


def _why(cls: str) -> str:
    when = set_apart_when(cls)
    also = (
        "; --include-system-paths includes them"
        if when == "always"
        else ("; the program does data I/O of its own, which decides the diagnosis")
    )
    return class_why(cls) + also
