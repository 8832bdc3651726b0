"""Order-dependent trace computations as vectorized numpy passes.

Position tracking and interval unions depend on event order within a (process, file)
or a process.  SQL window functions express them but sort once per window; here one
stable sort per pass and cumulative sums with per-group resets do the same work in
O(n log n) with no Python loop over events.  All functions are pure and unit-tested.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
BOOL = npt.NDArray[np.bool_]

#: Row kinds for :func:`classify_accesses`.
OTHER, STREAM, POSITIONAL, SETTER = 0, 1, 2, 3
UNKNOWN = -1


@dataclass
class Classified:
    """Per-access outcome, in the caller's original row order (only access rows are meaningful)."""

    start: I64  # start offset, UNKNOWN (-1) when the position is not known
    consecutive: BOOL
    sequential: BOOL  # includes consecutive
    random: BOOL


def _group_starts(g: npt.NDArray[np.generic]) -> BOOL:
    starts = np.empty(len(g), dtype=bool)
    if len(g):
        starts[0] = True
        starts[1:] = g[1:] != g[:-1]
    return starts


#: Accesses classified per chunk; bounds the temporaries of :func:`classify_accesses`.
CHUNK = 1 << 18


def classify_accesses(
    group: U64, ts: I64, kind: npt.NDArray[np.int8], nbytes: I64, offset: I64, setpos: I64
) -> Classified:
    """Consecutive / sequential / random per access, per (process, file) ``group``.

    ``kind``: STREAM (read/write advance the position by their bytes), POSITIONAL
    (pread/pwrite at ``offset``), SETTER (open/lseek/fseek/rewind set it to ``setpos``,
    UNKNOWN when e.g. append mode or a relative seek without result), OTHER (ignored).
    ``nbytes`` is UNKNOWN when the call's result is missing.  Rows are processed in
    (group, ts) order; ties keep input order (the trace file's order).  After one stable
    sort, whole groups are processed in chunks of about :data:`CHUNK` rows so the
    temporaries stay bounded however long the trace is.
    """
    n = len(group)
    out = Classified(
        start=np.full(n, UNKNOWN, dtype=np.int64),
        consecutive=np.zeros(n, dtype=bool),
        sequential=np.zeros(n, dtype=bool),
        random=np.zeros(n, dtype=bool),
    )
    if n == 0:
        return out
    order = np.lexsort((ts, group))  # stable
    g_sorted = group[order]
    bounds = np.flatnonzero(_group_starts(g_sorted))
    del g_sorted
    lo = 0
    while lo < n:
        # extend the chunk to the next group boundary at or after lo + CHUNK
        k = int(np.searchsorted(bounds, lo + CHUNK, side="left"))
        hi = int(bounds[k]) if k < len(bounds) else n
        idx = order[lo:hi]
        _classify_sorted(group[idx], kind[idx], nbytes[idx], offset[idx], setpos[idx], idx, out)
        lo = hi
    return out


def _classify_sorted(
    g: U64, k: npt.NDArray[np.int8], nb: I64, off: I64, sp: I64, idx: I64, out: Classified
) -> None:
    """Classify rows already in (group, ts) order that hold whole groups; write into ``out`` at ``idx``."""
    is_set = k == SETTER
    seg_start = _group_starts(g) | is_set
    seg_id = np.cumsum(seg_start) - 1
    first = np.flatnonzero(seg_start)
    del seg_start
    # A segment opened by a setter starts at its position; one that starts a group
    # without a setter has an unknown position (the file was opened before tracing).
    base = np.where(is_set[first], sp[first], UNKNOWN)[seg_id]
    stream = k == STREAM
    adv = np.where(stream & (nb > 0), nb, 0)
    adv_before = np.cumsum(adv)
    adv_before -= adv
    del adv
    advanced = adv_before - adv_before[first][seg_id]
    del adv_before
    lost = (stream & (nb < 0)).astype(np.int64)
    lost_before = np.cumsum(lost)
    lost_before -= lost
    del lost
    known = (base >= 0) & ((lost_before - lost_before[first][seg_id]) == 0)
    del lost_before, seg_id
    start = np.where(k == POSITIONAL, off, np.where(known, base + advanced, UNKNOWN))
    del base, advanced, known
    start[start < 0] = UNKNOWN

    acc = np.flatnonzero(stream | (k == POSITIONAL))
    a_start, a_nb = start[acc], nb[acc]
    end = np.where((a_start >= 0) & (a_nb >= 0), a_start + np.maximum(a_nb, 0), UNKNOWN)
    prev_end = np.empty_like(end)
    if len(end):
        prev_end[0] = UNKNOWN
        prev_end[1:] = end[:-1]
        prev_end[_group_starts(g[acc])] = UNKNOWN
    valid = (a_start >= 0) & (prev_end >= 0)
    where = idx[acc]
    out.start[where] = a_start
    out.consecutive[where] = valid & (a_start == prev_end)
    out.sequential[where] = valid & (a_start >= prev_end)
    out.random[where] = valid & (a_start < prev_end)


def interval_union(group: U64, start: I64, end: I64) -> tuple[U64, I64, I64]:
    """Merge intervals per group into disjoint islands: (group, island start, island end).

    An island begins where an interval starts after every earlier interval of its group
    has ended.  The running maximum of ends restarts per group by offsetting each group
    into its own range of a single monotone key.
    """
    if len(group) == 0:
        return group[:0], start[:0], end[:0]
    order = np.lexsort((end, start, group))
    g, s, e = group[order], start[order], end[order]
    gs = _group_starts(g)
    gidx = np.cumsum(gs) - 1
    lo = int(s.min())
    span = int(max(int(e.max()), int(s.max())) - lo) + 1
    if span * (int(gidx[-1]) + 1) < 2**62:
        key = gidx * span + (e - lo)
        run_max = np.maximum.accumulate(key) - gidx * span + lo
    else:  # pragma: no cover - astronomically long traces with many groups
        run_max = np.empty_like(e)
        for a, b in zip(np.flatnonzero(gs), [*np.flatnonzero(gs)[1:], len(e)], strict=True):
            run_max[a:b] = np.maximum.accumulate(e[a:b])
    prev_max = np.empty_like(run_max)
    prev_max[0] = lo - 1
    prev_max[1:] = run_max[:-1]
    new_island = gs | (s > prev_max)
    first = np.flatnonzero(new_island)
    return g[first], s[first], np.maximum.reduceat(e, first)


def union_and_overlap(
    io_group: U64, io_start: I64, io_end: I64, c_group: U64, c_start: I64, c_end: I64
) -> dict[int, tuple[int, int, int]]:
    """Per group: (I/O wall time, I/O time overlapped by compute, compute wall time).

    Unions first (islands are disjoint), then a sweep over island boundaries: between two
    consecutive boundaries of a group, the time counts as overlapped when an I/O island
    and a compute island are both open.
    """
    ig, is_, ie = interval_union(io_group, io_start, io_end)
    cg, cs, ce = interval_union(c_group, c_start, c_end)
    io_wall = _sum_by(ig, ie - is_)
    c_wall = _sum_by(cg, ce - cs)
    groups = set(io_wall) | set(c_wall)
    overlap: dict[int, int] = {}
    if len(ig) and len(cg):
        t = np.concatenate([is_, ie, cs, ce])
        grp = np.concatenate([ig, ig, cg, cg])
        dio = np.concatenate([np.ones(len(ig)), -np.ones(len(ig)), np.zeros(2 * len(cg))]).astype(np.int64)
        dc = np.concatenate([np.zeros(2 * len(ig)), np.ones(len(cg)), -np.ones(len(cg))]).astype(np.int64)
        order = np.lexsort((t, grp))
        t, grp, dio, dc = t[order], grp[order], dio[order], dc[order]
        io_open, c_open = np.cumsum(dio), np.cumsum(dc)  # each group's boundaries balance to 0
        span = np.zeros(len(t), dtype=np.int64)
        span[:-1] = t[1:] - t[:-1]
        span[np.flatnonzero(_group_starts(grp))[1:] - 1] = 0  # never across groups
        both = (io_open > 0) & (c_open > 0)
        overlap = _sum_by(grp[both], span[both])
    return {int(g): (io_wall.get(g, 0), overlap.get(g, 0), c_wall.get(g, 0)) for g in groups}


def _sum_by(group: U64, values: I64) -> dict[int, int]:
    if len(group) == 0:
        return {}
    keys, inv = np.unique(group, return_inverse=True)
    sums = np.zeros(len(keys), dtype=np.int64)
    np.add.at(sums, inv, values.astype(np.int64))
    return {int(k): int(v) for k, v in zip(keys, sums, strict=True)}
