"""The access-pattern guard and an I/O library's own layout (HDF5 chunking, alignment, pages).

A container file the application writes (here: a header, then 256 rows of 8 KiB) may be laid
out anew by a layout strategy: the same rows at other offsets, fetched as whole chunks. Its
positions are the library's, so they are not compared; what the trace cannot settle is asked.
"""

from __future__ import annotations

import random
from pathlib import Path

from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace

CAT = default_catalog()
KIB = 1024
DATA = "/data/sim"
H5 = f"{DATA}/out.h5"
ROWS, ROW = 256, 8 * KIB
SHUFFLED = random.Random(3).sample(range(ROWS), ROWS)


def _container(
    *,
    chunk_rows: int = 0,
    row: int = ROW,
    header: int = 2 * KIB,
    order: list[int] = SHUFFLED,
    path: str = H5,
) -> list[Proc]:
    """Rows written in order, then read back in ``order``: contiguous (row by row) or chunked
    (whole chunks written and read, after a chunk index)."""
    p = Proc(pid=1)
    p.open(path)
    p.write(path, header, offset=0)
    if chunk_rows:
        index = 4 * KIB
        p.write(path, index, offset=header)
        start = header + index
        for c in range(ROWS // chunk_rows):
            p.write(path, chunk_rows * row, offset=start + c * chunk_rows * row)
        for r in order:
            c = r // chunk_rows
            p.read(path, chunk_rows * row, offset=start + c * chunk_rows * row)
    else:
        for r in range(ROWS):
            p.write(path, row, offset=header + r * row)
        for r in order:
            p.read(path, row, offset=header + r * row)
    p.close(path)
    return [p]


def _arm(tmp: Path, name: str, procs: list[Proc], **work: float) -> Arm:
    return Arm(
        analysis=analyze([write_trace(tmp / name, procs)], profile=True), data_dir=DATA, work=work, label=name
    )


def test_a_new_layout_of_the_same_rows_is_not_a_pattern_change(tmp_path: Path) -> None:
    """Alignment: the same rows, sizes and order at other offsets pass without any evidence."""
    inc = _arm(tmp_path, "inc", _container())
    aligned = _arm(tmp_path, "aligned", _container(header=8 * KIB))
    d = access_pattern_guard(CAT.strategies["l2.hdf5_alignment"], inc, aligned)
    assert d.passed, d.reason
    assert "laid out 1 file(s) anew" in d.reason and d.details["relaid_out"] == ["<data>/out.h5"]


def test_chunks_fetched_whole_are_settled_by_the_work_counters_else_asked(tmp_path: Path) -> None:
    strategy = CAT.strategies["l2.hdf5_chunked_layout"]
    inc = _arm(tmp_path, "inc", _container())
    chunked = _arm(tmp_path, "chunked", _container(chunk_rows=8))
    d = access_pattern_guard(strategy, inc, chunked)
    assert not d.passed and d.verdict == "inconclusive", d.reason
    assert "read calls 8.0 KiB -> 64.0 KiB" in d.reason and "keep it" in d.details["question"]
    pinned = access_pattern_guard(
        strategy,
        _arm(tmp_path, "inc2", _container(), rows=ROWS),
        _arm(tmp_path, "chunked2", _container(chunk_rows=8), rows=ROWS),
    )
    assert pinned.passed and "the program reports the same work" in pinned.reason


def test_a_new_order_behind_a_new_layout_is_asked_even_with_counters(tmp_path: Path) -> None:
    """Sorted reads disguised as chunking: the counters are the same, the order is not theirs to show."""
    strategy = CAT.strategies["l2.hdf5_chunked_layout"]
    inc = _arm(tmp_path, "inc", _container(), rows=ROWS)
    relaid_sorted = _arm(tmp_path, "sorted", _container(chunk_rows=8, order=list(range(ROWS))), rows=ROWS)
    d = access_pattern_guard(strategy, inc, relaid_sorted)
    assert not d.passed and d.verdict == "inconclusive" and "go backwards" in d.reason
    assert "the work counters cannot show an order" in d.reason
    # in the same layout the sorted reads are the incumbent's ranges in another order: rejected
    same_layout = _arm(tmp_path, "sorted2", _container(order=list(range(ROWS))), rows=ROWS)
    assert access_pattern_guard(strategy, inc, same_layout).verdict == "rejected"


def test_fewer_bytes_is_never_a_new_layout(tmp_path: Path) -> None:
    """float32 rows under a layout strategy id: half the bytes at other ranges, rejected by both guards."""
    strategy = CAT.strategies["l2.hdf5_chunked_layout"]
    inc = _arm(tmp_path, "inc", _container())
    halved = _arm(tmp_path, "f4", _container(row=ROW // 2))
    d = access_pattern_guard(strategy, inc, halved)
    assert not d.passed and d.verdict == "rejected" and "different byte ranges" in d.reason
    less = no_doing_less_guard(inc, halved, strategy=strategy)
    assert not less.passed and less.verdict == "rejected"


def test_only_a_library_layout_strategy_may_move_the_bytes(tmp_path: Path) -> None:
    inc = _arm(tmp_path, "inc", _container())
    aligned = _arm(tmp_path, "aligned", _container(header=8 * KIB))
    d = access_pattern_guard(CAT.strategies["l1.write_buffering"], inc, aligned)
    assert not d.passed and d.verdict == "rejected" and "different byte ranges" in d.reason


def test_a_plain_files_offsets_are_the_applications(tmp_path: Path) -> None:
    """The same moved rows in a plain binary file (no container suffix or signature) under a layout
    id: the offsets are what the application asks for, so other ranges are a pattern change."""
    plain = f"{DATA}/out.bin"
    inc = _arm(tmp_path, "inc", _container(path=plain))
    moved = _arm(tmp_path, "moved", _container(header=8 * KIB, path=plain))
    d = access_pattern_guard(CAT.strategies["l2.hdf5_alignment"], inc, moved)
    assert not d.passed and d.verdict == "rejected" and "different byte ranges" in d.reason
