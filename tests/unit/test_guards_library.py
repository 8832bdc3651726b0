"""Turning ROMIO's aggregation on or off serves the same requests differently; the guards read the
library's own marks (read-modify-write windows, aggregators' domains) on exact synthetic traces,
and still refuse a change that does less or splits the application's records without them."""

from __future__ import annotations

from pathlib import Path

from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
from dftune.tools.guards.library import repeats, rmw_windows, sharing
from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace

CAT = default_catalog()
DS = CAT.strategies["l2.romio_ds"]
CB = CAT.strategies["l2.romio_cb"]
KIB = 1024
DATA = "/data/run"
SHARED = f"{DATA}/shared.dat"
RANKS, PIECES, PIECE = 2, 64, 4 * KIB  # per rank: 64 interleaved 4 KiB pieces
WINDOW = 16  # pieces of all ranks a sieving window spans


def _arm(tmp: Path, name: str, procs: list[Proc]) -> Arm:
    folder = write_trace(tmp / name, procs)
    return Arm(analysis=analyze([folder], profile=True), data_dir=DATA, label=name)


def _pieces(passes: int = 1) -> list[Proc]:
    """Independent writes without sieving: each rank's own pieces, one call each."""
    ps = [Proc(pid=100 + r) for r in range(RANKS)]
    for r, p in enumerate(ps):
        p.open(SHARED)
        for _ in range(passes):
            for i in range(PIECES):
                p.write(SHARED, PIECE, offset=(i * RANKS + r) * PIECE)
        p.close(SHARED)
    return ps


def _sieved(passes: int = 1) -> list[Proc]:
    """The same pieces through data sieving: per window a lock, a read of the window, a write of it."""
    ps = [Proc(pid=100 + r) for r in range(RANKS)]
    span = WINDOW * PIECE
    extent = PIECES * RANKS * PIECE
    for r, p in enumerate(ps):
        p.open(SHARED)
        for _ in range(passes):
            for off in range(r * PIECE, extent, span):
                size = min(span, extent - off)
                p.event("fcntl", fhash=p._fhash(SHARED))
                p.read(SHARED, size, offset=off)
                p.write(SHARED, size, offset=off)
                p.event("fcntl", fhash=p._fhash(SHARED))
        p.close(SHARED)
    return ps


def _two_phase() -> list[Proc]:
    """The same bytes through one aggregator: rank 0 writes the file in 64 KiB pieces."""
    ps = [Proc(pid=100 + r) for r in range(RANKS)]
    for p in ps:
        p.open(SHARED)
    for off in range(0, PIECES * RANKS * PIECE, 64 * KIB):
        ps[0].write(SHARED, 64 * KIB, offset=off)
    for p in ps:
        p.close(SHARED)
    return ps


def test_the_marks_of_sieving_and_two_phase_io(tmp_path: Path) -> None:
    sieved, pieces, aggregated = (
        _arm(tmp_path, "s", _sieved()),
        _arm(tmp_path, "p", _pieces()),
        _arm(tmp_path, "a", _two_phase()),
    )
    w = rmw_windows(sieved)
    assert w.calls == sieved.totals.write_calls > 0 and w.share == 1.0
    assert rmw_windows(pieces).calls == 0 and rmw_windows(aggregated).calls == 0
    spread, domains = sharing(pieces, "write"), sharing(aggregated, "write")
    assert spread is not None and (spread.share or 0.0) > 0.9 and spread.streams == 2
    assert domains is not None and domains.share is None and domains.streams == 1
    assert repeats(sieved, "write") == repeats(pieces, "write") == 1.0  # one pass each
    assert repeats(_arm(tmp_path, "twice", _sieved(passes=2)), "write") == 2.0


def test_disabling_data_sieving_passes_both_guards(tmp_path: Path) -> None:
    inc, exp = _arm(tmp_path, "sieved", _sieved()), _arm(tmp_path, "pieces", _pieces())
    pattern = access_pattern_guard(DS, inc, exp)
    assert pattern.passed, pattern.reason
    assert "read-modify-write windows" in pattern.reason
    less = no_doing_less_guard(inc, exp, incumbent=inc, strategy=DS)
    assert less.passed, less.reason
    assert "holes" in less.reason


def test_enabling_data_sieving_is_the_library_aggregating(tmp_path: Path) -> None:
    inc, exp = _arm(tmp_path, "pieces", _pieces()), _arm(tmp_path, "sieved", _sieved())
    pattern = access_pattern_guard(DS, inc, exp)
    assert pattern.passed, pattern.reason
    assert "the library's aggregation" in pattern.reason
    assert no_doing_less_guard(inc, exp, incumbent=inc, strategy=DS).passed


def test_fewer_passes_behind_the_sieving_are_still_doing_less(tmp_path: Path) -> None:
    """Windows in both arms: the bytes that went are whole passes, not the holes of windows."""
    inc, exp = _arm(tmp_path, "five", _sieved(passes=4)), _arm(tmp_path, "two", _sieved(passes=2))
    less = no_doing_less_guard(inc, exp, incumbent=inc, strategy=DS)
    assert not less.passed and less.verdict == "rejected", less.reason
    assert "write bytes" in less.reason


def test_fewer_passes_as_pieces_are_doing_less(tmp_path: Path) -> None:
    """Sieving off and half the passes: more bytes went than the windows' holes."""
    inc, exp = _arm(tmp_path, "sieved", _sieved(passes=2)), _arm(tmp_path, "once", _pieces(passes=1))
    less = no_doing_less_guard(inc, exp, incumbent=inc, strategy=DS)
    assert not less.passed, less.reason


def test_smaller_calls_without_the_librarys_marks_are_split_records(tmp_path: Path) -> None:
    """One process writing 64 KiB records, then the same bytes in 4 KiB calls: the application's
    request changed, not the library's aggregation."""
    big, small = Proc(pid=100), Proc(pid=100)
    for p, size in ((big, 64 * KIB), (small, PIECE)):
        p.open(SHARED)
        for off in range(0, PIECES * RANKS * PIECE, size):
            p.write(SHARED, size, offset=off)
    d = access_pattern_guard(DS, _arm(tmp_path, "big", [big]), _arm(tmp_path, "small", [small]))
    assert not d.passed and "got smaller" in d.reason, d.reason


def test_disabling_collective_buffering_spreads_the_aggregators_domain(tmp_path: Path) -> None:
    inc, exp = _arm(tmp_path, "two_phase", _two_phase()), _arm(tmp_path, "pieces", _pieces())
    d = access_pattern_guard(CB, inc, exp)
    assert d.passed, d.reason
    assert "aggregators' contiguous domains" in d.reason
    back = access_pattern_guard(CB, exp, inc)  # and turning it on again
    assert back.passed and "the library's aggregation" in back.reason, back.reason
