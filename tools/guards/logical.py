"""The application's logical access pattern, compared between two arms.

What must not change is what the application asks for: which files, which byte ranges, what
request sizes, and the order class of each logical stream. How many threads or processes serve
the requests, and how the requests are aggregated or split physically (buffering, chunking,
collective buffering, data sieving, prefetching) are not the pattern. So the comparison is:

- **per stream**: a stream is one thread of one process (dftracer's ``tid``); threads of one
  process interleave, each keeps its own order. A stream's order class is the share of its
  requests that go backwards in (file name, offset) order: a shuffled reader has about half,
  a walk in file order none, whatever the number of streams sharing the work;
- **on a common grid that survives coalescing**: the byte ranges of both arms' requests are
  merged into blocks where they overlap (a 64 KiB chunk read holds the four 16 KiB samples
  the other arm read), and both arms' requests are mapped onto those blocks before their order
  is compared. Coalescing and chunking of the same ranges then leave the order unchanged;
- **from the highest layer the trace has** (the request log keeps STDIO above POSIX).

When one arm's requests are larger, the grid also gives the evidence that they serve the same
logical requests: the blocks are first touched in the same order by both arms, and that order
is not simply the file order (a shuffled sequence followed block by block; a larger
application record would come with a sequence of its own). Darshan's DXT and Recorder's
per-call traces are read the same way when one asks whether a change is two-phase I/O or a
different application (ROMIO's collective buffering and data sieving change only the calls).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dftune.tools.guards.rules import guard_rules
from dftune.tools.trace.model import RequestLog

I64 = npt.NDArray[np.int64]

#: The thresholds below (min_transitions, order_floor, min_follow_blocks, follows, distinctive) are
#: resources/guards.toml's, with their sources.
T = guard_rules


@dataclass(frozen=True)
class Requests:
    """One arm's requests in one direction, expanded: stream, file index, start, size, first ts."""

    stream: I64
    file: I64
    start: I64
    size: I64
    ts: I64

    @property
    def count(self) -> int:
        return len(self.stream)

    @property
    def mean_size(self) -> float | None:
        return float(self.size.mean()) if len(self.size) else None


def requests(
    log: RequestLog, keys: Mapping[str, str], file_index: dict[str, int], direction: str
) -> Requests:
    """Expand the log's runs of one direction on the data files (``keys``: path -> data-file key;
    ``file_index`` numbers the keys as they are met, shared by both arms, and grows with new keys)."""
    want = int(direction == "write")
    rows: list[tuple[int, int, int, int, int, int]] = []
    for s_ix, stream in enumerate(log.streams):
        for f, w, start, size, calls, ts in stream.runs:
            key = keys.get(log.paths[f]) if 0 <= f < len(log.paths) else None
            if key is not None and w == want and calls > 0:
                rows.append((s_ix, file_index.setdefault(key, len(file_index)), start, size, calls, ts))
    if not rows:
        empty = np.zeros(0, dtype=np.int64)
        return Requests(empty, empty, empty, empty, empty)
    r = np.asarray(rows, dtype=np.int64)
    n = r[:, 4]
    head = np.repeat(np.cumsum(n) - n, n)
    step = np.arange(int(n.sum()), dtype=np.int64) - head  # index of each request within its run
    first = np.repeat(r[:, 2], n)
    sizes = np.repeat(r[:, 3], n)
    return Requests(
        np.repeat(r[:, 0], n),
        np.repeat(r[:, 1], n),
        np.where(first >= 0, first + step * sizes, -1),
        sizes,
        np.repeat(r[:, 5], n),
    )


@dataclass(frozen=True)
class Grid:
    """Blocks over both arms' requests (ranges merged where they overlap) and each request's block."""

    blocks: int
    of_a: I64
    of_b: I64
    #: the file (rank of its name) each block belongs to
    file_of_block: I64


def running_end(group: I64, end: I64) -> I64:
    """The furthest ``end`` so far within each run of equal ``group`` values (ranges sorted by
    group, then start): where the union of a group's ranges reaches at each range. A loop over the
    few groups is cheap next to the sort; within a group numpy's accumulate does the work."""
    reach = end.copy()
    bounds = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    for g0, g1 in zip(bounds.tolist(), [*bounds[1:].tolist(), len(group)], strict=True):
        reach[g0:g1] = np.maximum.accumulate(end[g0:g1])
    return reach


def common_grid(a: Requests, b: Requests, rank: Mapping[int, int]) -> Grid:
    """Merge the positioned requests of both arms into blocks wherever they overlap (touching
    ranges stay apart); blocks are numbered in (file name, offset) order (``rank``: file index ->
    rank of its name). Unpositioned requests get block -1."""
    n_a = a.count
    file = np.r_[a.file, b.file]
    lo = np.r_[a.start, b.start]
    hi = lo + np.r_[a.size, b.size]
    pos = lo >= 0
    out = np.full(len(file), -1, dtype=np.int64)
    idx = np.flatnonzero(pos)
    if len(idx) == 0:
        return Grid(0, out[:n_a], out[n_a:], np.zeros(0, dtype=np.int64))
    lookup = np.zeros(max(rank, default=-1) + 1, dtype=np.int64)
    lookup[list(rank)] = list(rank.values())
    frank = lookup[file[idx]]
    order = np.lexsort((lo[idx], frank))
    r, s, e = frank[order], lo[idx][order], hi[idx][order]
    reach = running_end(r, e)
    new = np.r_[True, (r[1:] != r[:-1]) | (s[1:] >= reach[:-1])]  # a new file, or past the reach
    block = np.cumsum(new) - 1
    mapped = np.empty(len(idx), dtype=np.int64)
    mapped[order] = block
    out[idx] = mapped
    return Grid(int(block[-1]) + 1, out[:n_a], out[n_a:], r[np.flatnonzero(new)])


@dataclass(frozen=True)
class Order:
    """A stream-wise order class: transitions between successive distinct blocks of a stream,
    and how many of them go backwards."""

    backward: int
    transitions: int
    streams: int

    @property
    def share(self) -> float | None:
        return self.backward / self.transitions if self.transitions else None

    @property
    def label(self) -> str:
        share = self.share
        if share is None:
            return "unknown"
        return "in file order" if share <= T().order_floor else "out of file order"


#: the two levels of a stream's order: the steps within a file, and the moves from file to file
LEVELS = ("within files", "across files")


def stream_order(req: Requests, block: I64, file_of_block: I64) -> dict[str, Order]:
    """Per stream, consecutive requests in the same block are one visit; count the backward steps
    within files and across files apart (a shuffle of files read front to back has all of its
    backward steps across files, diluted by the forward ones inside each file if counted together)."""
    keep = block >= 0
    s, b = req.stream[keep], block[keep]
    streams = len(np.unique(s))
    if len(s) < 2:
        return {level: Order(0, 0, streams) for level in LEVELS}
    f = file_of_block[b]
    # collapse repeated visits: a step is taken from the previous distinct block of the stream
    moved = (s[1:] == s[:-1]) & (b[1:] != b[:-1])
    back = moved & (b[1:] < b[:-1])
    same_file = f[1:] == f[:-1]
    return {
        level: Order(int((back & where).sum()), int((moved & where).sum()), streams)
        for level, where in zip(LEVELS, (same_file, ~same_file), strict=True)
    }


def order_changed(before: Order, after: Order) -> bool | None:
    """None: too few steps to say; else whether the share of backward steps changed class: by
    more than three standard errors (few requests are noisy), by at least half of the larger share
    (a shuffle over files read in several requests dilutes the share with the forward steps
    inside each file, on both arms alike) and by more than the order floor."""
    p1, p2 = before.share, after.share
    if p1 is None or p2 is None or min(before.transitions, after.transitions) < T().min_transitions:
        return None
    pooled = (before.backward + after.backward) / (before.transitions + after.transitions)
    se = float(np.sqrt(max(pooled * (1 - pooled), 1e-12) * (1 / before.transitions + 1 / after.transitions)))
    return abs(p2 - p1) > max(T().order_sigmas * se, T().order_relative * max(p1, p2), T().order_floor)


@dataclass(frozen=True)
class Follow:
    """Do the coarser arm's blocks come in the finer arm's order? (rank correlations within files)"""

    blocks: int
    with_finer: float | None
    finer_with_file_order: float | None

    @property
    def distinctive(self) -> bool:
        return (
            self.blocks >= T().min_follow_blocks
            and self.finer_with_file_order is not None
            and self.finer_with_file_order <= T().distinctive
        )

    @property
    def follows(self) -> bool:
        return self.distinctive and self.with_finer is not None and self.with_finer >= T().follows

    @property
    def departs(self) -> bool:
        return self.distinctive and self.with_finer is not None and self.with_finer < T().distinctive


def _first_touch(req: Requests, block: I64, blocks: int) -> npt.NDArray[np.float64]:
    first = np.full(blocks, np.inf)
    keep = block >= 0
    np.minimum.at(first, block[keep], req.ts[keep].astype(np.float64))
    return first


def spearman(x: npt.ArrayLike, y: npt.ArrayLike) -> float | None:
    """Spearman's rank correlation (ties get their average rank), or None for fewer than three
    values or a constant side."""
    from scipy import stats  # a second of imports: only when a guard compares orders

    x, y = np.asarray(x), np.asarray(y)
    if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return None  # a constant side has no order to correlate
    rho = stats.spearmanr(x, y).statistic
    return None if rho is None or not np.isfinite(rho) else float(rho)


def _within_files(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], files: I64
) -> tuple[float | None, int]:
    """Rank correlation of ``x`` and ``y`` within each file, averaged with the files' block counts
    as weights (files of fewer than 3 blocks say nothing about an order), and the blocks counted."""
    total = weight = 0.0
    counted = 0
    for f in np.unique(files):
        sel = files == f
        if int(sel.sum()) < 3:
            continue
        rho = spearman(x[sel], y[sel])
        if rho is None:
            continue
        n = float(sel.sum())
        total, weight, counted = total + rho * n, weight + n, counted + int(n)
    return (total / weight if weight else None), counted


def follows(finer: Requests, coarser: Requests, grid: Grid, finer_is_a: bool) -> Follow:
    """Compare the order in which both arms first touch the blocks of each file they share (an
    interleaving over files, e.g. rows written round-robin, is followed by records of any size,
    so only the order within files counts)."""
    fb, cb = (grid.of_a, grid.of_b) if finer_is_a else (grid.of_b, grid.of_a)
    f_first, c_first = _first_touch(finer, fb, grid.blocks), _first_touch(coarser, cb, grid.blocks)
    both = np.flatnonzero(np.isfinite(f_first) & np.isfinite(c_first))
    files = grid.file_of_block[both]
    with_finer, counted = _within_files(f_first[both], c_first[both], files)
    with_order, _ = _within_files(f_first[both], both.astype(np.float64), files)
    return Follow(counted, with_finer, with_order)


@dataclass(frozen=True)
class Direction:
    """One direction's logical comparison of two arms."""

    direction: str
    before: Requests
    after: Requests
    grid: Grid
    #: each level's order class (:data:`LEVELS`): (before, after)
    orders: dict[str, tuple[Order, Order]]
    follow: Follow | None

    def details(self) -> dict[str, object]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 3)

        return {
            "requests": [self.before.count, self.after.count],
            "mean_request_bytes": [r(self.before.mean_size), r(self.after.mean_size)],
            "streams": [self.orders[LEVELS[0]][0].streams, self.orders[LEVELS[0]][1].streams],
            "blocks": self.grid.blocks,
            "backward_share": {k: [r(b.share), r(a.share)] for k, (b, a) in self.orders.items()},
            "transitions": {k: [b.transitions, a.transitions] for k, (b, a) in self.orders.items()},
            "follows": None
            if self.follow is None
            else {
                "blocks": self.follow.blocks,
                "with_finer": r(self.follow.with_finer),
                "finer_with_file_order": r(self.follow.finer_with_file_order),
            },
        }


def compare(
    before: RequestLog,
    after: RequestLog,
    keys_before: Mapping[str, str],
    keys_after: Mapping[str, str],
    direction: str,
) -> Direction | None:
    """The logical comparison of one direction (None: neither arm has requests in it)."""
    index: dict[str, int] = {}
    a = requests(before, keys_before, index, direction)
    b = requests(after, keys_after, index, direction)
    if a.count == 0 or b.count == 0:
        return None
    names = sorted(index)
    rank = {index[n]: i for i, n in enumerate(names)}
    grid = common_grid(a, b, rank)
    follow = None
    sa, sb = a.mean_size or 0.0, b.mean_size or 0.0
    if sa != sb:
        finer_is_a = sa < sb
        follow = follows(a if finer_is_a else b, b if finer_is_a else a, grid, finer_is_a)
    before_order = stream_order(a, grid.of_a, grid.file_of_block)
    after_order = stream_order(b, grid.of_b, grid.file_of_block)
    orders = {level: (before_order[level], after_order[level]) for level in LEVELS}
    return Direction(direction, a, b, grid, orders, follow)


def own_order(log: RequestLog, keys: Mapping[str, str], direction: str) -> dict[str, Order]:
    """One arm's order classes on its own requests: for files whose positions the two arms do not
    share (an I/O library laid them out anew), so no common grid can be drawn. Each distinct
    (file, start offset) is a block: overlapping requests (a data-sieving window per row) would
    merge a whole file into one block and leave no order to compare."""
    index: dict[str, int] = {}
    req = requests(log, keys, index, direction)
    lookup = np.zeros(len(index), dtype=np.int64)
    lookup[[index[n] for n in sorted(index)]] = np.arange(len(index))  # file index -> rank of its name
    pos = req.start >= 0
    block = np.full(req.count, -1, dtype=np.int64)
    if not pos.any():
        return stream_order(req, block, np.zeros(0, dtype=np.int64))
    pairs = np.stack([lookup[req.file[pos]], req.start[pos]], axis=1)
    uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)  # sorted by (file rank, start)
    block[pos] = inverse.reshape(-1)
    return stream_order(req, block, uniq[:, 0])
