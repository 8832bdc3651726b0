"""Two analyses side by side: what changed between a baseline and a candidate trace set.

The MCP ``comparator`` tool needs it to say whether an experiment moved the I/O (and by how
much) without the client diffing two large analysis documents itself. Counts, bytes and
time per family get a relative change; percentages get the difference in points, because
a relative change of a share is misleading (5% -> 10% is "+100%").
"""

from __future__ import annotations

from typing import Any

from dftune.tools.trace.model import Analysis
from dftune.tools.trace.semantics import FAMILIES

SCHEMA = "dftune.comparison/1"

#: Scalars of the analysis compared as quantities (relative change).
QUANTITIES = (
    "files",
    "events",
    "processes",
    "job_time_s",
    "io_time_s",
    "io_wall_time_s",
    "unoverlapped_io_time_s",
    "bw_job_mib_s",
    "files_accessed",
)
#: Shares compared in percentage points.
SHARES = (
    "read_time_pct",
    "write_time_pct",
    "metadata_time_pct",
    "small_io_pct",
    "small_read_pct",
    "small_write_pct",
    "seq_pct",
    "consecutive_pct",
    "rand_pct",
    "misaligned_pct",
)
FAMILY_FIELDS = ("count", "bytes", "time_s", "mean_xfer_bytes")


def relative_change_pct(a: float | None, b: float | None) -> float | None:
    """(b - a) / a in percent; None when either side is unknown or a is 0 (undefined)."""
    if a is None or b is None or a == 0:
        return None
    return round(100.0 * (b - a) / abs(a), 3)


def _quantity(a: float | None, b: float | None) -> dict[str, Any]:
    return {"a": a, "b": b, "change_pct": relative_change_pct(a, b)}


def _share(a: float, b: float) -> dict[str, Any]:
    return {"a": a, "b": b, "delta_pp": round(b - a, 3)}


def compare_analyses(a: Analysis, b: Analysis, *, label_a: str = "a", label_b: str = "b") -> dict[str, Any]:
    """The ``dftune.comparison/1`` document: b relative to a (a is the reference)."""
    families = {
        fam: {f: _quantity(getattr(getattr(a, fam), f), getattr(getattr(b, fam), f)) for f in FAMILY_FIELDS}
        for fam in FAMILIES
    }
    notes = []
    if a.events and b.events and (a.read.bytes or 0) + (a.write.bytes or 0) > 0:
        moved_a = (a.read.bytes or 0) + (a.write.bytes or 0)
        moved_b = (b.read.bytes or 0) + (b.write.bytes or 0)
        if moved_b < moved_a:
            notes.append(
                f"b moved fewer bytes than a ({moved_b} < {moved_a}): a speed-up may be doing less work"
            )
    return {
        "schema": SCHEMA,
        "a": label_a,
        "b": label_b,
        "summary": {k: _quantity(getattr(a, k), getattr(b, k)) for k in QUANTITIES},
        "families": families,
        "shares": {k: _share(getattr(a, k), getattr(b, k)) for k in SHARES},
        "shape": {"a": a.shape.kind, "b": b.shape.kind},
        "notes": notes,
    }
