"""What an MPI-IO library's own aggregation leaves in a POSIX trace.

dftracer sees the calls ROMIO makes, not the MPI-IO calls the application made. Two of ROMIO's
optimizations (Thakur, Gropp and Lusk, "Data Sieving and Collective I/O in ROMIO", Frontiers '99)
leave marks the guards and the estimates read:

- **data sieving for writes** is a read-modify-write: the library locks a window of the file,
  reads it, copies the application's pieces in and writes the whole window back, holes and all.
  Its mark: a write of exactly the range the same stream read just before;
- **data sieving for reads** reads one window from the first piece a call asks for to its last
  and copies the pieces out: each process reads the holes between its pieces too (the other
  processes' pieces, or bytes nobody asked for). Its mark: another arm's smaller reads all lie
  inside the windows, several to a window, and its processes read fewer distinct bytes;
- **two-phase (collective) I/O**: each aggregator moves its own contiguous file domain, so the
  processes' extents do not overlap; independent calls of ranks that interleave their pieces do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dftune.tools.guards.arms import Arm
from dftune.tools.guards.logical import requests, running_end
from dftune.tools.guards.rules import guard_rules


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
class ReadWindows:
    """A coarse arm's reads of files neither arm writes, as windows over a fine arm's pieces."""

    #: the coarse arm's read calls on those files (the windows) and the fine arm's (the pieces)
    windows: int
    pieces: int
    #: bytes the coarse arm's processes read at least once beyond the fine arm's, summed over the
    #: processes: the holes each window read between its own process's pieces
    holes: int
    #: the same over the files (any process): holes no process of the fine arm reads at all
    file_holes: int


def _merged(group: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The union of each group's ranges as disjoint sorted intervals (group, start, end)."""
    order = np.lexsort((lo, group))
    group, lo, hi = group[order], lo[order], hi[order]
    reach = running_end(group, hi)
    opens = np.r_[True, (group[1:] != group[:-1]) | (lo[1:] > reach[:-1])]  # touching ranges join
    starts = np.flatnonzero(opens)
    ends = np.r_[starts[1:], len(lo)] - 1
    return group[starts], lo[starts], reach[ends]


def _covered(group: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> int:
    """Distinct bytes of each group's ranges, summed over the groups."""
    if not len(lo):
        return 0
    _, s, e = _merged(group, lo, hi)
    return int((e - s).sum())


def _inside(inner: tuple[np.ndarray, ...], outer: tuple[np.ndarray, ...]) -> int:
    """Bytes of the ``inner`` intervals (per file, disjoint) that lie inside the ``outer`` ones."""
    total = 0
    for f in np.unique(inner[0]).tolist():
        o = outer[0] == f
        s, e = outer[1][o], outer[2][o]
        if not len(s):
            continue
        below = np.r_[0, np.cumsum(e - s)]  # bytes of outer intervals wholly before each one

        def upto(
            x: np.ndarray, s: np.ndarray = s, e: np.ndarray = e, below: np.ndarray = below
        ) -> np.ndarray:
            k = np.searchsorted(s, x, side="right")  # outer intervals starting at or before x
            last = np.maximum(k - 1, 0)
            part = np.where(k > 0, np.minimum(x, e[last]) - s[last], 0)
            return below[last] * (k > 0) + part

        i = inner[0] == f
        total += int((upto(inner[2][i]) - upto(inner[1][i])).sum())
    return total


def read_windows(coarse: Arm, fine: Arm) -> ReadWindows | None:
    """The ``coarse`` arm's reads as data-sieving windows over the ``fine`` arm's pieces (see the
    module docstring), on the data files neither arm writes; None without the mark."""
    if coarse.request_log is None or fine.request_log is None:
        return None
    written = {k for arm in (coarse, fine) for k, f in arm.files.items() if f.write_bytes}
    index: dict[str, int] = {}
    arms = []
    for arm in (coarse, fine):
        keys = {path: key for path, key in arm.data_keys.items() if key not in written}
        req = requests(arm.request_log, keys, index, "read")  # type: ignore[arg-type]
        keep = req.start >= 0
        arms.append((req.stream[keep], req.file[keep], req.start[keep], req.start[keep] + req.size[keep]))
    (cs, cf, clo, chi), (fs, ff, flo, fhi) = arms
    if len(clo) < 1 or len(flo) < max(guard_rules().library_min_calls, 2 * len(clo)):
        return None
    windows, pieces = _merged(cf, clo, chi), _merged(ff, flo, fhi)
    spread = int((pieces[2] - pieces[1]).sum())
    if _inside(pieces, windows) < guard_rules().windows_inside * spread:
        return None  # the fine arm reads bytes the windows never held: other data
    streams = 1 + int(max(cs.max(), fs.max()))
    per_stream = _covered(cf * streams + cs, clo, chi) - _covered(ff * streams + fs, flo, fhi)
    if per_stream <= 0:
        return None  # the windows held nothing the pieces do not: no holes, not sieving
    return ReadWindows(
        windows=len(clo),
        pieces=len(flo),
        holes=per_stream,
        file_holes=max(int((windows[2] - windows[1]).sum()) - spread, 0),
    )


@dataclass(frozen=True)
class Sharing:
    """How the processes share the data files in one direction (one pass over the request log)."""

    #: of the calls on files two or more streams access, the share inside another stream's extent;
    #: None when those files hold fewer than the threshold library_min_calls
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
    share = inside / total if total >= guard_rules().library_min_calls else None
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
    unique = _covered(file * (1 + int(stream.max())) + stream, lo, hi)
    return float((hi - lo).sum()) / unique if unique else None
