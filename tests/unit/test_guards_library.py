"""Turning ROMIO's aggregation on or off serves the same requests differently; the guards read the
library's own marks (read-modify-write windows, aggregators' domains) on exact synthetic traces,
and still refuse a change that does less or splits the application's records without them."""

from __future__ import annotations

from pathlib import Path

from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
from dftune.tools.guards.library import read_windows, repeats, rmw_windows, sharing
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


# ----- data sieving for reads: a file the program only reads

INPUT = f"{DATA}/input.dat"


def _read_pieces(passes: int = 1, gap: int = 1, every: int = 1) -> list[Proc]:
    """Independent reads without sieving: each rank's own pieces, one call each. ``gap`` 2 leaves
    a record nobody asks for after each round of the ranks' pieces; ``every`` 2 skips half of them."""
    ps = [Proc(pid=200 + r) for r in range(RANKS)]
    for r, p in enumerate(ps):
        p.open(INPUT)
        for _ in range(passes):
            for i in range(0, PIECES, every):
                p.read(INPUT, PIECE, offset=(i * RANKS * gap + r) * PIECE)
        p.close(INPUT)
    return ps


def _read_sieved(passes: int = 1, gap: int = 1) -> list[Proc]:
    """The same pieces through data sieving: each rank reads windows from its first piece to its
    last, the holes between its pieces (the other rank's, or nobody's) included."""
    ps = [Proc(pid=200 + r) for r in range(RANKS)]
    span = WINDOW * PIECE
    for r, p in enumerate(ps):
        first, end = r * PIECE, ((PIECES - 1) * RANKS * gap + r + 1) * PIECE
        p.open(INPUT)
        for _ in range(passes):
            for off in range(first, end, span):
                p.read(INPUT, min(span, end - off), offset=off)
        p.close(INPUT)
    return ps


def test_the_mark_of_read_sieving(tmp_path: Path) -> None:
    sieved, pieces = _arm(tmp_path, "s", _read_sieved()), _arm(tmp_path, "p", _read_pieces())
    rw = read_windows(sieved, pieces)
    assert rw is not None and rw.pieces == RANKS * PIECES and rw.windows == sieved.totals.read_calls
    # each rank's windows held the other rank's pieces: the holes, per process
    assert rw.holes == pieces.totals.read_bytes - 2 * PIECE and rw.file_holes == 0
    assert read_windows(pieces, sieved) is None  # the pieces are not windows over the windows
    assert read_windows(sieved, _arm(tmp_path, "s2", _read_sieved())) is None  # no pieces inside
    assert repeats(sieved, "read") == repeats(pieces, "read") == 1.0


def test_disabling_read_sieving_passes_both_guards(tmp_path: Path) -> None:
    inc, exp = (
        _arm(tmp_path, "sieved", _read_sieved(passes=2)),
        _arm(tmp_path, "pieces", _read_pieces(passes=2)),
    )
    pattern = access_pattern_guard(DS, inc, exp)
    assert pattern.passed, pattern.reason
    assert "sieving windows" in pattern.reason
    less = no_doing_less_guard(inc, exp, incumbent=inc, strategy=DS)
    assert less.passed, less.reason
    assert "read bytes" in less.reason and "2 time(s) over" in less.reason


def test_read_sieving_over_bytes_nobody_asked_for_is_a_persons_question(tmp_path: Path) -> None:
    """Windows over records the program never asks for: the trace cannot tell them from pieces a
    program stopped reading, so neither guard decides; neither refuses."""
    inc, exp = _arm(tmp_path, "sieved", _read_sieved(gap=2)), _arm(tmp_path, "pieces", _read_pieces(gap=2))
    pattern = access_pattern_guard(DS, inc, exp)
    assert not pattern.passed and pattern.verdict == "inconclusive", pattern.reason
    assert "data-sieving read windows" in pattern.reason and "same data?" in pattern.reason
    less = no_doing_less_guard(inc, exp, incumbent=inc, strategy=DS)
    assert not less.passed and less.verdict == "inconclusive", less.reason
    assert "input bytes read once" in less.reason


def test_half_the_pieces_behind_the_read_windows_is_never_a_pass(tmp_path: Path) -> None:
    """A decoy: sieving off and every other piece dropped. Inside the windows, as holes would be:
    a person is asked; it is never passed."""
    inc, exp = _arm(tmp_path, "sieved", _read_sieved()), _arm(tmp_path, "half", _read_pieces(every=2))
    for d in (access_pattern_guard(DS, inc, exp), no_doing_less_guard(inc, exp, incumbent=inc, strategy=DS)):
        assert not d.passed and d.verdict in ("inconclusive", "rejected"), d.reason


def test_a_pass_less_behind_the_read_windows_is_doing_less(tmp_path: Path) -> None:
    inc, exp = (
        _arm(tmp_path, "sieved", _read_sieved(passes=2)),
        _arm(tmp_path, "once", _read_pieces(passes=1)),
    )
    less = no_doing_less_guard(inc, exp, incumbent=inc, strategy=DS)
    assert not less.passed and less.verdict == "rejected", less.reason
    assert "read bytes" in less.reason


def test_reads_outside_the_windows_are_other_data(tmp_path: Path) -> None:
    """The experiment's pieces lie past the incumbent's windows: other data, not the holes."""
    inc = _arm(tmp_path, "sieved", _read_sieved())
    exp = _arm(tmp_path, "elsewhere", _read_pieces(gap=2))
    assert read_windows(inc, exp) is None
    d = access_pattern_guard(DS, inc, exp)
    assert not d.passed and d.verdict == "rejected", d.reason
