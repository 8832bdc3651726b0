"""Independent MPI-IO calls, told from the POSIX calls ROMIO makes and the hints it printed: its
collective buffering then has nothing to aggregate, and the estimate says so."""

from __future__ import annotations

from pathlib import Path

from dftune.agents.optimizer.collective import collective_gap
from dftune.tools.guards import Arm
from dftune.tools.guards.library import Sharing, sharing
from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace

KIB = 1024
DATA = "/data/run"
SHARED = f"{DATA}/restart.dat"
RECORDS = 64  # per rank
AUTOMATIC = [{"romio_cb_write": "automatic", "romio_cb_read": "automatic", "cb_nodes": "1"}]


def _arm(tmp: Path, procs: list[Proc]) -> Arm:
    return Arm(analysis=analyze([write_trace(tmp, procs)], profile=True), data_dir=DATA)


def _independent(ranks: int = 2, *, read_back: bool = False) -> list[Proc]:
    """Each rank writes its own 1 KiB records, interleaved with the other ranks' (independent
    calls through a strided view, data sieving off: one pwrite per record)."""
    ps = [Proc(pid=100 + r) for r in range(ranks)]
    for r, p in enumerate(ps):
        p.open(SHARED)
        for i in range(RECORDS):
            p.write(SHARED, KIB, offset=(i * ranks + r) * KIB)
        if read_back:
            for i in range(RECORDS):
                p.read(SHARED, KIB, offset=(i * ranks + r) * KIB)
        p.close(SHARED)
    return ps


def _two_phase(aggregators: int, ranks: int = 2) -> list[Proc]:
    """The same bytes through two-phase I/O: each aggregator writes its own contiguous file domain."""
    ps = [Proc(pid=100 + r) for r in range(ranks)]
    total = RECORDS * ranks * KIB
    domain = total // aggregators
    for r, p in enumerate(ps):
        p.open(SHARED)
        if r < aggregators:
            for off in range(r * domain, (r + 1) * domain, 16 * KIB):
                p.write(SHARED, 16 * KIB, offset=off)
        p.close(SHARED)
    return ps


def test_interleaved_records_of_two_ranks_with_cb_automatic_are_independent_calls(tmp_path: Path) -> None:
    arm = _arm(tmp_path, _independent(read_back=True))
    seen = sharing(arm, "write") or Sharing(None, 0, 0, "")
    assert (seen.share or 0.0) > 0.95 and seen.calls == 2 * RECORDS
    assert seen.streams == 2 and seen.busiest == "<data>/restart.dat"
    gap = collective_gap(arm, AUTOMATIC)
    assert gap is not None and "independent" in gap
    assert "romio_cb_write=automatic" in gap and "romio_cb_read=automatic" in gap


def test_aggregators_writing_their_own_domains_are_collective(tmp_path: Path) -> None:
    for aggregators in (1, 2):
        arm = _arm(tmp_path / str(aggregators), _two_phase(aggregators))
        seen = sharing(arm, "write")
        assert seen is not None and seen.streams == aggregators
        assert seen.share is None if aggregators == 1 else seen.share == 0.0  # one writer: not shared
        assert collective_gap(arm, AUTOMATIC) is None


def test_without_the_hints_in_effect_or_with_cb_disabled_nothing_is_inferred(tmp_path: Path) -> None:
    arm = _arm(tmp_path, _independent())
    assert collective_gap(arm, []) is None  # ROMIO printed nothing: unknown
    # collective calls are served independently under romio_cb_write=disable: enabling it may matter
    assert collective_gap(arm, [{"romio_cb_write": "disable", "romio_cb_read": "automatic"}]) is None
    mixed = [AUTOMATIC[0], {"romio_cb_write": "disable"}]
    assert collective_gap(arm, mixed) is None


def test_a_direction_that_aggregates_keeps_the_hints_worth_trying(tmp_path: Path) -> None:
    """Independent writes but two-phase reads: a read hint may still matter."""
    ps = _independent()
    total = RECORDS * 2 * KIB
    ps[0].open(SHARED)
    for off in range(0, total, 8 * KIB):
        ps[0].read(SHARED, 8 * KIB, offset=off)
    arm = _arm(tmp_path / "a", ps)
    reads = sharing(arm, "read")
    assert reads is not None and reads.streams == 1 and reads.share is None  # one reader
    assert collective_gap(arm, AUTOMATIC) is not None  # reads are not shared: the writes decide
    split = _independent()
    for r, p in enumerate(split):  # each rank reads its own half: shared, not interleaved
        for off in range(r * total // 2, (r + 1) * total // 2, 8 * KIB):
            p.read(SHARED, 8 * KIB, offset=off)
    assert collective_gap(_arm(tmp_path / "c", split), AUTOMATIC) is None


def test_a_file_every_rank_reads_a_few_times_is_not_evidence(tmp_path: Path) -> None:
    ps = [Proc(pid=100 + r) for r in range(2)]
    for p in ps:
        p.open(f"{DATA}/config.ini")
        p.read(f"{DATA}/config.ini", 512, offset=0)
        p.read(f"{DATA}/config.ini", 512, offset=512)
    arm = _arm(tmp_path, ps)
    reads = sharing(arm, "read")
    assert reads is not None and reads.share is None and collective_gap(arm, AUTOMATIC) is None
