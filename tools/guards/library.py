"""What an MPI-IO library's own aggregation leaves in a POSIX trace.

dftracer sees the calls ROMIO makes, not the MPI-IO calls the application made. Two of ROMIO's
optimizations (Thakur, Gropp and Lusk, "Data Sieving and Collective I/O in ROMIO", Frontiers '99)
leave marks the guards and the estimates read:

- **data sieving for writes** is a read-modify-write: the library locks a window of the file,
  reads it, copies the application's pieces in and writes the whole window back, holes and all.
  Its mark: a write of exactly the range the same stream read just before;
- **two-phase (collective) I/O**: each aggregator moves its own contiguous file domain, so the
  processes' extents do not overlap; independent calls of ranks that interleave their pieces do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dftune.tools.guards.arms import Arm
from dftune.tools.guards.logical import requests

#: fewest calls in a direction before its shared files say anything (a configuration file every
#: rank reads is not the program's I/O)
MIN_CALLS = 8


@dataclass(frozen=True)
class Windows:
    """The read-modify-write windows of one arm's writes to its data files."""

    calls: int
    bytes: int
    #: every byte written to the data files (the windows' share is of these)
    write_bytes: int

    @property
    def share(self) -> float:
        """Of the bytes written, the share written back after being read to modify."""
        return self.bytes / self.write_bytes if self.write_bytes else 0.0


def _reread(prev: tuple[int, int, int, int, int, int] | None, f: int, start: int, size: int) -> bool:
    """Whether a write of ``size`` bytes at ``start`` of file ``f`` rewrites the last call of the
    run just before it on its stream, a read."""
    if prev is None or prev[1] or prev[0] != f or start < 0 or prev[3] != size:
        return False
    return prev[2] + size * (prev[4] - 1) == start


def rmw_windows(arm: Arm) -> Windows:
    """Writes of exactly the range the same stream read just before (data sieving's windows)."""
    log = arm.request_log
    calls = nbytes = total_bytes = 0
    if log is None:
        return Windows(0, 0, 0)
    data = [log.paths[i] in arm.data_keys for i in range(len(log.paths))]
    for stream in log.streams:
        prev: tuple[int, int, int, int, int, int] | None = None
        for run in stream.runs:
            f, w, start, size, n, _ = run
            if not (0 <= f < len(data) and data[f]):
                continue
            if w:
                total_bytes += size * n
                # the read run just before, its last call over the same range
                if _reread(prev, f, start, size):
                    calls += 1
                    nbytes += size
            prev = run
    return Windows(calls, nbytes, total_bytes)


@dataclass(frozen=True)
class Sharing:
    """How the processes share the data files in one direction (one pass over the request log)."""

    #: of the calls on files two or more streams access, the share inside another stream's extent;
    #: None when those files hold fewer than :data:`MIN_CALLS` calls
    share: float | None
    #: the calls on those shared files
    calls: int
    #: the most streams that access one data file (1: nothing is shared)
    streams: int
    #: the shared file with the most calls
    busiest: str


def sharing(arm: Arm, direction: str) -> Sharing | None:
    """How the streams share the data files they access in ``direction`` (None: no positioned call)."""
    log = arm.request_log
    if log is None:
        return None
    index: dict[str, int] = {}
    req = requests(log, arm.data_keys, index, direction)
    names = {i: key for key, i in index.items()}
    positioned = req.start >= 0
    if not positioned.any():
        return None
    stream, file, start = req.stream[positioned], req.file[positioned], req.start[positioned]
    end = start + req.size[positioned]
    inside = total = widest = 0
    busiest, most = "", -1
    for f in np.unique(file).tolist():
        on = file == f
        s, lo, hi = stream[on], start[on], end[on]
        streams = np.unique(s).tolist()
        widest = max(widest, len(streams))
        if len(streams) < 2:
            continue
        hit = np.zeros(len(s), dtype=bool)
        for other in streams:
            mine = s == other
            hit |= ~mine & (lo >= lo[mine].min()) & (lo < hi[mine].max())
        inside += int(hit.sum())
        total += len(s)
        if len(s) > most:
            busiest, most = names.get(f, str(f)), len(s)
    share = inside / total if total >= MIN_CALLS else None
    return Sharing(share=share, calls=total, streams=widest, busiest=busiest)


def repeats(arm: Arm, direction: str) -> float | None:
    """How many times each stream moves each byte it moves, on average (bytes over the union of its
    own ranges, per file): a window of data sieving moves the other processes' bytes once too, so
    this counts passes over the data, which sieving does not change (None: no positioned call)."""
    log = arm.request_log
    if log is None:
        return None
    req = requests(log, arm.data_keys, {}, direction)
    keep = req.start >= 0
    if not keep.any():
        return None
    stream, file, lo = req.stream[keep], req.file[keep], req.start[keep]
    hi = lo + req.size[keep]
    order = np.lexsort((lo, file, stream))
    stream, file, lo, hi = stream[order], file[order], lo[order], hi[order]
    group = np.r_[True, (stream[1:] != stream[:-1]) | (file[1:] != file[:-1])]
    ids = np.cumsum(group) - 1
    reach = hi.copy()
    for g in np.flatnonzero(group).tolist():  # the furthest end so far within each stream's file
        last = int(np.searchsorted(ids, ids[g], side="right"))
        reach[g:last] = np.maximum.accumulate(hi[g:last])
    prior = np.r_[0, reach[:-1]]
    start = np.where(group, lo, np.maximum(lo, prior))
    unique = int(np.maximum(hi - start, 0).sum())
    return float((hi - lo).sum()) / unique if unique else None
