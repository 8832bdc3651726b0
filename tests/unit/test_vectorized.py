"""Position tracking and interval unions on hand-worked sequences (the I/O semantics of docs/analyze.md)."""

from __future__ import annotations

import numpy as np
import pytest

from dftune.tools.trace import vectorized as V

S, P, T = V.STREAM, V.POSITIONAL, V.SETTER
U = V.UNKNOWN


def run(rows: list[tuple[int, int, int, int, int, int]]) -> V.Classified:
    """rows: (group, ts, kind, nbytes, offset, setpos)."""
    a = np.array(rows, dtype=np.int64).reshape(-1, 6)
    return V.classify_accesses(
        a[:, 0].astype(np.uint64), a[:, 1], a[:, 2].astype(np.int8), a[:, 3], a[:, 4], a[:, 5]
    )


def labels(res: V.Classified) -> list[str]:
    out = []
    for c, s, r in zip(res.consecutive, res.sequential, res.random, strict=True):
        out.append("C" if c else "S" if s else "R" if r else "-")
    return out


def test_open_then_reads_are_consecutive_after_the_first() -> None:
    res = run([(1, 0, T, U, U, 0), (1, 1, S, 100, U, U), (1, 2, S, 100, U, U), (1, 3, S, 50, U, U)])
    assert list(res.start) == [U, 0, 100, 200]
    assert labels(res) == ["-", "-", "C", "C"]


def test_lseek_backwards_is_random_and_forward_gap_is_sequential_not_consecutive() -> None:
    res = run(
        [
            (1, 0, T, U, U, 0),
            (1, 1, S, 100, U, U),
            (1, 2, T, U, U, 500),
            (1, 3, S, 10, U, U),  # gap forward: sequential
            (1, 4, T, U, U, 0),
            (1, 5, S, 10, U, U),  # back to 0: random
        ]
    )
    assert list(res.start[[1, 3, 5]]) == [0, 500, 0]
    assert labels(res)[3] == "S" and labels(res)[5] == "R"


def test_pread_uses_its_offset_and_does_not_move_the_stream_position() -> None:
    res = run([(1, 0, T, U, U, 0), (1, 1, S, 10, U, U), (1, 2, P, 10, 5000, U), (1, 3, S, 10, U, U)])
    assert list(res.start[1:]) == [0, 5000, 10]
    # read after pread starts at 10, before the pread's end (5010): random
    assert labels(res) == ["-", "-", "S", "R"]


def test_unknown_position_is_never_assumed_sequential() -> None:
    # no open/lseek seen for this file: stream reads have unknown starts
    res = run([(1, 0, S, 10, U, U), (1, 1, S, 10, U, U)])
    assert labels(res) == ["-", "-"]
    # append-mode open (setpos unknown) and a read of unknown size both lose the position
    res = run([(2, 0, T, U, U, U), (2, 1, S, 10, U, U), (2, 2, S, 10, U, U)])
    assert labels(res) == ["-", "-", "-"]
    res = run([(3, 0, T, U, U, 0), (3, 1, S, U, U, U), (3, 2, S, 10, U, U), (3, 3, S, 10, U, U)])
    assert list(res.start) == [U, 0, U, U]
    assert labels(res) == ["-", "-", "-", "-"]


def test_groups_are_independent_and_input_order_does_not_matter() -> None:
    rows = [
        (2, 1, S, 10, U, U),
        (1, 1, S, 10, U, U),
        (2, 0, T, U, U, 0),
        (1, 0, T, U, U, 40),
        (1, 2, S, 5, U, U),
    ]
    res = run(rows)
    assert list(res.start) == [0, 40, U, U, 50]
    assert labels(res) == ["-", "-", "-", "-", "C"]


def test_equal_timestamps_keep_trace_order() -> None:
    res = run([(1, 5, T, U, U, 0), (1, 5, S, 10, U, U), (1, 5, S, 10, U, U)])
    assert list(res.start) == [U, 0, 10]


def test_empty_input() -> None:
    res = run([])
    assert len(res.start) == 0


@pytest.mark.parametrize(
    ("intervals", "expected"),
    [
        ([(0, 10), (5, 15), (20, 30)], [(0, 15), (20, 30)]),
        ([(0, 10), (10, 20)], [(0, 20)]),  # touching intervals merge
        ([(0, 100), (10, 20), (30, 40)], [(0, 100)]),  # nested
        ([(5, 5)], [(5, 5)]),
    ],
)
def test_interval_union(intervals: list[tuple[int, int]], expected: list[tuple[int, int]]) -> None:
    s = np.array([a for a, _ in intervals], dtype=np.int64)
    e = np.array([b for _, b in intervals], dtype=np.int64)
    _, is_, ie = V.interval_union(np.zeros(len(s), dtype=np.uint64), s, e)
    assert list(zip(is_.tolist(), ie.tolist(), strict=True)) == expected


def test_union_and_overlap_per_group() -> None:
    io_g = np.array([1, 1, 2], dtype=np.uint64)
    io_s = np.array([0, 50, 0], dtype=np.int64)
    io_e = np.array([100, 150, 10], dtype=np.int64)
    c_g = np.array([1, 1], dtype=np.uint64)
    c_s = np.array([90, 140], dtype=np.int64)
    c_e = np.array([120, 200], dtype=np.int64)
    out = V.union_and_overlap(io_g, io_s, io_e, c_g, c_s, c_e)
    # group 1: I/O [0,150] = 150; compute [90,120]+[140,200]; overlap 30 + 10 = 40
    assert out[1] == (150, 40, 90)
    # group 2: no compute at all: every I/O microsecond is unoverlapped
    assert out[2] == (10, 0, 0)


def test_chunking_never_changes_the_classification(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    n = 20_000
    args = (
        rng.integers(0, 300, n).astype(np.uint64),
        rng.integers(0, 5000, n).astype(np.int64),
        rng.choice([0, 1, 2, 3], n).astype(np.int8),
        rng.choice([-1, 0, 10, 4096], n).astype(np.int64),
        rng.integers(-1, 10_000, n).astype(np.int64),
        rng.choice([-1, 0, 100, 5000], n).astype(np.int64),
    )
    monkeypatch.setattr(V, "CHUNK", 1 << 30)
    whole = V.classify_accesses(*args)
    monkeypatch.setattr(V, "CHUNK", 7)
    chunked = V.classify_accesses(*args)
    for field in ("start", "consecutive", "sequential", "random"):
        assert (getattr(whole, field) == getattr(chunked, field)).all(), field
    assert whole.sequential.sum() > 0 and whole.random.sum() > 0
