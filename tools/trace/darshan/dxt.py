"""DXT: Darshan's per-operation trace (offset, length, start, end of every read and write).

Where DXT traced every POSIX read and write, dftune's position semantics apply exactly, as on
a dftracer trace: per (rank, file) in time order, an access is consecutive when it starts
where the previous one ended, sequential when at or after, random when before, and the first
one is unclassified.  The same operations give the time view and the rank x time heatmap.
All of it is vectorized over the operations (one sort, shifted arrays, bincounts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dftune.tools.trace import semantics as S
from dftune.tools.trace.darshan.job import Job

#: classes of an operation in :attr:`DxtOps.cls`
UNCLASSIFIED, CONSECUTIVE, SEQUENTIAL, RANDOM = 0, 1, 2, 3


@dataclass
class DxtOps:
    """Operations of one DXT module of all logs, sorted by (rank x file record, start time)."""

    module: str
    group: np.ndarray  # one value per (log, record): a rank x file
    rank: np.ndarray  # global rank
    ids: np.ndarray  # file record id
    is_write: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    start: np.ndarray  # seconds on the job's common clock
    end: np.ndarray
    cls: np.ndarray
    hosts: list[str]

    def __len__(self) -> int:
        return len(self.start)


def dxt_ops(job: Job, module: str) -> DxtOps | None:
    """The operations of ``module`` (DXT_POSIX or DXT_MPIIO) in every log, or None when absent."""
    parts = [(i, lg.dxt[module]) for i, lg in enumerate(job.logs) if module in lg.dxt]
    if not parts:
        return None
    group, rank, ids, is_write, segs = [], [], [], [], []
    base = 0
    hosts: set[str] = set()
    for i, t in parts:
        group.append(t.record + base)
        base += len(t.rec_ids)
        r = t.rec_ranks[t.record]
        rank.append(np.where(r >= 0, r + job.offsets[i], -1))
        ids.append(t.rec_ids[t.record])
        is_write.append(t.is_write)
        s = t.segments.copy()
        s["start"] += job.clock[i]
        s["end"] += job.clock[i]
        segs.append(s)
        hosts.update(h for h in t.rec_hosts if h)
    seg = np.concatenate(segs)
    g = np.concatenate(group)
    order = np.lexsort((seg["start"], g))  # stable: ties keep DXT's order
    g, seg = g[order], seg[order]
    ops = DxtOps(
        module=module,
        group=g,
        rank=np.concatenate(rank)[order],
        ids=np.concatenate(ids)[order],
        is_write=np.concatenate(is_write)[order],
        offset=seg["offset"],
        length=seg["length"],
        start=seg["start"],
        end=seg["end"],
        cls=np.zeros(len(g), dtype=np.int8),
        hosts=sorted(hosts),
    )
    ops.cls = classify(ops.group, ops.offset, ops.length)
    return ops


def classify(group: np.ndarray, offset: np.ndarray, length: np.ndarray) -> np.ndarray:
    """dftune's access classes against the previous access of the same group (ops sorted by group)."""
    cls = np.zeros(len(group), dtype=np.int8)
    if not len(group):
        return cls
    prev_end = np.empty_like(offset)
    prev_end[1:] = offset[:-1] + length[:-1]
    first = np.ones(len(group), dtype=bool)
    first[1:] = group[1:] != group[:-1]
    cls[~first & (offset == prev_end)] = CONSECUTIVE
    cls[~first & (offset > prev_end)] = SEQUENTIAL
    cls[~first & (offset < prev_end)] = RANDOM
    return cls


def size_bins(length: np.ndarray) -> np.ndarray:
    """dftune's size-bin index of each operation (semantics.SIZE_BINS edges)."""
    edges = np.array([lo for _, lo in S.SIZE_BINS[1:]], dtype=np.int64)
    return np.searchsorted(edges, length, side="right")


def family_exact(ops: DxtOps, write: bool) -> dict[str, float]:
    """Exact per-family numbers from the operations of one direction."""
    m = ops.is_write == write
    dur = (ops.end - ops.start)[m]
    cls, length = ops.cls[m], ops.length[m]
    small = length < S.SMALL_IO_BYTES
    return {
        "ops": int(m.sum()),
        "bytes": int(length.sum()),
        "consecutive": int((cls == CONSECUTIVE).sum()),
        "sequential": int(((cls == CONSECUTIVE) | (cls == SEQUENTIAL)).sum()),
        "random": int((cls == RANDOM).sum()),
        "random_time_s": float(dur[cls == RANDOM].sum()),
        "small": int(small.sum()),
        "small_time_s": float(dur[small].sum()),
    }


def size_hist(ops: DxtOps) -> dict[str, dict[str, int]]:
    out = {}
    for fam, write in (("read", False), ("write", True)):
        counts = np.bincount(size_bins(ops.length[ops.is_write == write]), minlength=len(S.SIZE_BINS))
        out[fam] = {label: int(counts[i]) for i, (label, _) in enumerate(S.SIZE_BINS)}
    return out


def per_rank(ops: DxtOps) -> dict[int, tuple[int, int, float]]:
    """rank -> (operations, bytes, time in calls) from the traced operations."""
    ranks, inv = np.unique(ops.rank, return_inverse=True)
    n = np.bincount(inv, minlength=len(ranks))
    b = np.bincount(inv, weights=ops.length, minlength=len(ranks))
    t = np.bincount(inv, weights=ops.end - ops.start, minlength=len(ranks))
    return {int(r): (int(n[i]), int(b[i]), float(t[i])) for i, r in enumerate(ranks)}


def per_file_classes(ops: DxtOps) -> dict[int, tuple[int, int]]:
    """file id -> (sequential, random) classified accesses."""
    out: dict[int, tuple[int, int]] = {}
    ids, inv = np.unique(ops.ids, return_inverse=True)
    seq = np.bincount(inv, weights=(ops.cls == CONSECUTIVE) | (ops.cls == SEQUENTIAL), minlength=len(ids))
    rnd = np.bincount(inv, weights=ops.cls == RANDOM, minlength=len(ids))
    for i, fid in enumerate(ids):
        out[int(fid)] = (int(seq[i]), int(rnd[i]))
    return out


def time_view(ops: DxtOps, job_time_s: float, windows: int, nprocs: int) -> dict[str, object]:
    """Windows over the job (ops by their start time) and a rank x window heatmap of bytes."""
    width = max(job_time_s, float(ops.end.max()) if len(ops) else 0.0, 1e-9) / windows
    b = np.minimum((ops.start // width).astype(np.int64), windows - 1).clip(0)
    dur = ops.end - ops.start
    rows = []
    for i in range(windows):
        m = b == i
        r, w = m & ~ops.is_write, m & ops.is_write
        rb, wb = int(ops.length[r].sum()), int(ops.length[w].sum())
        rows.append(
            {
                "start_s": round(i * width, 6),
                "end_s": round((i + 1) * width, 6),
                "read_count": int(r.sum()),
                "read_bytes": rb,
                "write_count": int(w.sum()),
                "write_bytes": wb,
                "metadata_count": None,
                "read_time_s": round(float(dur[r].sum()), 6),
                "write_time_s": round(float(dur[w].sum()), 6),
                "metadata_time_s": 0.0,
                "io_time_s": round(float(dur[m].sum()), 6),
                "bandwidth_mib_s": round((rb + wb) / float(1 << 20) / width, 3),
            }
        )
    return {
        "origin_us": 0,
        "window_s": width,
        "windows": windows,
        "rows": rows,
        "source": ops.module,
        "heatmap": heatmap(ops.rank, b, ops.length, ops.is_write, windows, width, ops.module),
    }


#: ranks kept in a heatmap (the busiest; the JSON stays small on 10^4-10^5-rank jobs)
HEATMAP_MAX_RANKS = 1024


def heatmap(
    rank: np.ndarray,
    window: np.ndarray,
    nbytes: np.ndarray,
    is_write: np.ndarray,
    windows: int,
    width: float,
    source: str,
) -> dict[str, object]:
    """Bytes per (rank, window), read and write; ranks with no I/O are left out, and past
    :data:`HEATMAP_MAX_RANKS` only the busiest ranks are kept (``ranks_total`` says how many there were)."""
    ranks, inv = np.unique(rank, return_inverse=True)
    cell = inv * windows + window
    grids = {
        name: np.bincount(cell[m], weights=nbytes[m], minlength=len(ranks) * windows).reshape(
            len(ranks), windows
        )
        for name, m in (("read_bytes", ~is_write), ("write_bytes", is_write))
    }
    keep = np.arange(len(ranks))
    if len(ranks) > HEATMAP_MAX_RANKS:
        busy = grids["read_bytes"].sum(axis=1) + grids["write_bytes"].sum(axis=1)
        keep = np.sort(np.argsort(-busy, kind="stable")[:HEATMAP_MAX_RANKS])
    out: dict[str, object] = {
        "source": source,
        "window_s": width,
        "windows": windows,
        "ranks": ranks[keep].tolist(),
        "ranks_total": len(ranks),
    }
    for name, grid in grids.items():
        out[name] = grid[keep].astype(np.int64).tolist()
    return out
