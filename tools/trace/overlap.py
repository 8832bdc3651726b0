"""Overlap of I/O with compute across the processes of a rank group.

Why: a data loader's workers read while its main process computes; judged per process, every
byte they read looks "not hidden behind compute" because they compute nothing themselves.  The
per-file partials keep only per-process sums, so for each rank group that has workers and
computes, this re-reads the group's trace files keeping each process's merged I/O and compute
intervals (``ReadOptions(spans=True)``), and measures the group's I/O wall time (the union over
its processes) and the part of it no compute of the group covers.
"""

from __future__ import annotations

from dftune.tools.trace.processes import Proc, group_label
from dftune.tools.trace.reader import FilePartial, ReadOptions, read_file

#: Groups spread over more trace files than this keep the per-process judgement (reading them
#: all again would cost as much as the analysis itself).
MAX_GROUP_FILES = 64


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _covered(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Length of the intersection of two sorted disjoint interval lists."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def group_overlap(partials: list[FilePartial], procs: list[Proc]) -> dict[str, tuple[int, int]]:
    """Per rank group with workers and compute: (I/O wall us over its processes, unhidden I/O us)."""
    compute: dict[tuple[str, int | None], float] = {}
    for part in partials:
        table = part.tables.get("proc")
        if table is not None and "compute_wall_us" in table.column_names:
            for row in table.select(["host", "pid", "compute_wall_us"]).to_pylist():
                key = (str(row["host"] or ""), None if row["pid"] is None else int(row["pid"]))
                compute[key] = compute.get(key, 0.0) + float(row["compute_wall_us"] or 0)
    groups: dict[str, list[Proc]] = {}
    for p in procs:
        if p.helper is None:
            groups.setdefault(group_label(p), []).append(p)
    out: dict[str, tuple[int, int]] = {}
    options = ReadOptions(skip_bad=True, native=False, spans=True)
    for label, members in groups.items():
        if len(members) < 2 or not any(compute.get(m.key, 0) > 0 for m in members):
            continue
        files = sorted({f for m in members for f in m.files if f < len(partials)})
        if not files or len(files) > MAX_GROUP_FILES:
            continue
        keys = {m.key for m in members}
        io: list[tuple[int, int]] = []
        work: list[tuple[int, int]] = []
        for f in files:
            table = read_file(partials[f].path, options).tables.get("spans")
            if table is None:
                continue
            for row in table.to_pylist():
                if (str(row["host"] or ""), None if row["pid"] is None else int(row["pid"])) in keys:
                    (work if row["kind"] else io).append((int(row["s"]), int(row["e"])))
        io_u, work_u = _union(io), _union(work)
        wall = sum(e - s for s, e in io_u)
        out[label] = (wall, wall - _covered(io_u, work_u))
    return out
