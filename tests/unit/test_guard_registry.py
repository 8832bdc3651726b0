"""The measuring guards as a registry: one row per signal and per allowance of resources/guards.toml,
each an exact synthetic trace pair (tests/tracegen.py) judged by the real guards, and the row says
which signal was found and which allowance decided it (the decision's ``signals`` trail).

The rows' arms come from the guards' own test modules where a case was built there already (the
library's sieving and aggregation, the logical order, the HDF5 layout)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from dftune.core.domain.verdicts import GuardDecision
from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
from dftune.tools.guards.evidence import BUDGETS, EVIDENCE
from dftune.tools.guards.rules import guard_rules
from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace
from tests.unit import test_guards_library as lib
from tests.unit import test_guards_logical as logical
from tests.unit import test_guards_measured as measured
from tests.unit import test_guards_relayout as relayout

CAT = default_catalog()
S = CAT.strategies
KIB = 1024
DATA = measured.DATA
FILES = measured.FILES


def _arm(tmp: Path, name: str, procs: list[Proc], **work: float) -> Arm:
    return Arm(
        analysis=analyze([write_trace(tmp / name, procs)], profile=True), data_dir=DATA, work=work, label=name
    )


def _opens(twice: bool) -> list[Proc]:
    """Each sample read whole; ``twice``: opened again for its second half (more metadata calls)."""
    p = Proc(pid=3)
    for path in FILES:
        p.open(path)
        p.read(path, 8 * KIB)
        if twice:
            p.close(path)
            p.open(path)
        p.read(path, 8 * KIB)
        p.close(path)
    return [p]


def _ahead(extra: int) -> list[Proc]:
    """Each sample's first 12 KiB, and ``extra`` bytes read ahead of them."""
    p = Proc(pid=4)
    for path in FILES:
        p.open(path)
        p.read(path, 12 * KIB + extra, offset=0)
        p.close(path)
    return [p]


def _rereading(window: bool) -> list[Proc]:
    """Blocks read in file order; ``window``: each block read again after the next (a sliding
    re-read, every second step backwards)."""
    p = Proc(pid=5)
    for i in range(64):
        p.read(logical.BIG, 16 * KIB, offset=i * 16 * KIB)
        if window and i:
            p.read(logical.BIG, 16 * KIB, offset=(i - 1) * 16 * KIB)
    return [p]


def _split(order: list[int], parts: int) -> list[Proc]:
    """Each shuffled sample read in ``parts`` calls, one after the other."""
    p = Proc(pid=6)
    size = logical.SAMPLE // parts
    for sample in order:
        for k in range(parts):
            p.read(logical.BIG, size, offset=sample * logical.SAMPLE + k * size)
    return [p]


def _with_index(write: bool) -> list[Proc]:
    ps = measured._reader(FILES)
    if write:
        ps[0].open(f"{DATA}/.index")
        ps[0].write(f"{DATA}/.index", 4 * KIB)
    return ps


def _whole(order: list[str]) -> list[Proc]:
    return measured._reader(order)


def _without_log(arm: Arm) -> Arm:
    """The arm as an analysis made before request logs existed (orders from file totals only)."""
    assert arm.analysis.profile is not None
    profile = arm.analysis.profile.model_copy(update={"requests": None})
    return Arm(analysis=arm.analysis.model_copy(update={"profile": profile}), data_dir=DATA, label=arm.label)


@dataclass(frozen=True)
class Row:
    covers: tuple[str, ...]
    decide: Callable[[Path], GuardDecision]
    verdict: str | None  # None: passed
    says: str


def _lost_one(tmp: Path, everywhere: bool = False) -> Arm:
    """A four-thread reader whose analyzed replicate lacks the last file (the tracer lost a
    thread's last events), while another replicate read it; ``everywhere``: no replicate did."""
    arm = _arm(tmp, "exp", measured._reader(FILES[:-1], procs=4))
    others = FILES[:-1] if everywhere else FILES
    return replace(arm, seen_paths={"read": frozenset(others)})


def _work(
    tmp: Path, strategy: str, base: list[Proc], exp: list[Proc], inc: list[Proc] | None = None, **w: float
) -> GuardDecision:
    b, e = _arm(tmp, "base", base, **w), _arm(tmp, "exp", exp, **w)
    i = _arm(tmp, "inc", inc, **w) if inc is not None else None
    return no_doing_less_guard(b, e, incumbent=i, strategy=S[strategy])


def _pattern(
    tmp: Path, strategy: str, inc: Arm | list[Proc], exp: Arm | list[Proc], **w: float
) -> GuardDecision:
    i = inc if isinstance(inc, Arm) else _arm(tmp, "inc", inc, **w)
    e = exp if isinstance(exp, Arm) else _arm(tmp, "exp", exp, **w)
    return access_pattern_guard(S[strategy], i, e)


SHUFFLED = random.Random(5).sample(FILES, len(FILES))
ROWS: dict[str, Row] = {
    "half the data under a cache's id": Row(
        ("less_logical_work",),
        lambda t: _work(t, "l1.dataset_cache", measured._reader(FILES), measured._reader(FILES[:20])),
        "rejected",
        "input bytes read once 655,360 -> 327,680",
    ),
    "the same bytes in fewer reads": Row(
        ("fewer_read_calls", "merged_reads"),
        lambda t: _work(
            t, "l1.read_buffering", measured._reader(FILES), measured._reader(FILES, chunk=16 * KIB)
        ),
        None,
        "as buffering/coalescing allows: read calls",
    ),
    "the same bytes in fewer writes": Row(
        ("fewer_write_calls", "merged_writes"),
        lambda t: _work(t, "l1.write_buffering", measured._writer(KIB), measured._writer(64 * KIB)),
        None,
        "write calls",
    ),
    "fewer opens of the same files": Row(
        ("fewer_metadata_calls", "fewer_metadata"),
        lambda t: _work(t, "l1.open_once", _opens(twice=True), _opens(twice=False)),
        None,
        "metadata calls",
    ),
    "a cache's re-reads, the passes counted": Row(
        ("fewer_read_bytes", "cache_rereads"),
        lambda t: _work(
            t, "l1.dataset_cache", measured._reader(FILES, twice=True), measured._reader(FILES), samples=80
        ),
        None,
        "reads more than once",
    ),
    "a cache's re-reads, the passes not counted": Row(
        ("cache_rereads",),
        lambda t: _work(t, "l1.dataset_cache", measured._epochs(2), measured._epochs(1)),
        "inconclusive",
        "as many passes over its data",
    ),
    "fewer bytes written under a buffer's id": Row(
        ("fewer_write_bytes",),
        lambda t: _work(
            t, "l1.write_buffering", measured._writer(KIB), measured._writer(KIB, total=128 * KIB)
        ),
        "rejected",
        "write bytes",
    ),
    "a lost epoch behind a kept cache": Row(
        ("passes_behind_a_cache",),
        lambda t: _work(
            t,
            "l1.dataloader_workers",
            measured._epochs(2),
            measured._epochs(1),
            measured._epochs(2, cached=True),
        ),
        "inconclusive",
        "kept change no longer re-reads them",
    ),
    "write sieving turned off": Row(
        ("write_sieving", "library_rmw_reads"),
        lambda t: no_doing_less_guard(
            lib._arm(t, "s", lib._sieved()), lib._arm(t, "p", lib._pieces()), strategy=lib.DS
        ),
        None,
        "read-modify-write windows",
    ),
    "read sieving turned off": Row(
        ("read_sieving",),
        lambda t: no_doing_less_guard(
            lib._arm(t, "s", lib._read_sieved()), lib._arm(t, "p", lib._read_pieces()), strategy=lib.DS
        ),
        None,
        "data sieving reads the holes",
    ),
    "read windows over bytes nobody asked for (work)": Row(
        ("sieved_input",),
        lambda t: no_doing_less_guard(
            lib._arm(t, "s", lib._read_sieved(gap=2)),
            lib._arm(t, "p", lib._read_pieces(gap=2)),
            strategy=lib.DS,
        ),
        "inconclusive",
        "same data?",
    ),
    "read windows over bytes nobody asked for (pattern)": Row(
        ("sieved_ranges",),
        lambda t: access_pattern_guard(
            lib.DS, lib._arm(t, "s", lib._read_sieved(gap=2)), lib._arm(t, "p", lib._read_pieces(gap=2))
        ),
        "inconclusive",
        "data-sieving read windows",
    ),
    "the program reports other work": Row(
        ("work_counters_changed",),
        lambda t: _pattern(
            t,
            "l1.dataloader_workers",
            _arm(t, "a", measured._reader(FILES), samples=40),
            _arm(t, "b", measured._reader(FILES), samples=20),
        ),
        "rejected",
        "reports different work",
    ),
    "half the files no longer read": Row(
        ("files_gone",),
        lambda t: _pattern(t, "l1.dataloader_workers", measured._reader(FILES), measured._reader(FILES[:20])),
        "rejected",
        "no longer reads 20 of the 40",
    ),
    "a file the analyzed replicate lost, read by another replicate": Row(
        ("files_gone", "lost_trace_events"),
        lambda t: _pattern(t, "l1.concurrent_io_pool", measured._reader(FILES), _lost_one(t)),
        None,
        "events the tracer lost",
    ),
    "a file no replicate of the experiment read any more": Row(
        ("files_gone",),
        lambda t: _pattern(
            t, "l1.concurrent_io_pool", measured._reader(FILES), _lost_one(t, everywhere=True)
        ),
        "rejected",
        "no longer reads 1 of the 40",
    ),
    "a file the incumbent never wrote, under staging": Row(
        ("files_new", "staged_copies"),
        lambda t: _pattern(t, "l3.stage_shm", _with_index(False), _with_index(True)),
        None,
        "staging",
    ),
    "other byte ranges": Row(
        ("ranges_changed",),
        lambda t: _pattern(t, "l1.dataloader_workers", _ahead(4 * KIB), _ahead(0)),
        "rejected",
        "different byte ranges of 40 of 40",
    ),
    "reads run ahead": Row(
        ("prefetch_ahead",),
        lambda t: _pattern(t, "l1.background_prefetch", _ahead(0), _ahead(4 * KIB)),
        None,
        "prefetching",
    ),
    "the shuffle removed": Row(
        ("order_changed",),
        lambda t: _pattern(
            t,
            "l1.dataloader_workers",
            logical._threads(logical.ORDER, 1),
            logical._threads(sorted(logical.ORDER), 1),
        ),
        "rejected",
        "visited in another order",
    ),
    "aggregators reorder the calls": Row(
        ("aggregator_order",),
        lambda t: _pattern(
            t, "l2.romio_cb", logical._threads(logical.ORDER, 1), logical._threads(sorted(logical.ORDER), 1)
        ),
        None,
        "aggregation",
    ),
    "re-reads served from memory leave fewer backward steps": Row(
        ("cache_order",),
        lambda t: _pattern(t, "l1.dataset_cache", _rereading(window=True), _rereading(window=False)),
        None,
        "caching",
    ),
    "files visited in another order (no request log)": Row(
        ("visit_order_changed",),
        lambda t: _pattern(
            t,
            "l1.dataloader_workers",
            _without_log(_arm(t, "a", _whole(SHUFFLED))),
            _without_log(_arm(t, "b", _whole(FILES))),
        ),
        "rejected",
        "visited in another order",
    ),
    "smaller records in a new shuffle": Row(
        ("smaller_requests",),
        lambda t: _pattern(
            t,
            "l1.read_chunk_size",
            logical._threads(logical.ORDER, 1),
            logical._threads(random.Random(7).sample(range(2 * logical.N), 2 * logical.N), 1, size=8 * KIB),
        ),
        "rejected",
        "got smaller",
    ),
    "each sample read in two calls, in order": Row(
        ("split_requests",),
        lambda t: _pattern(t, "l1.read_chunk_size", _split(logical.ORDER, 1), _split(logical.ORDER, 2)),
        None,
        "split calls",
    ),
    "the same records, the program's count pinning them": Row(
        ("resized_records",),
        lambda t: _pattern(
            t,
            "l1.write_buffering",
            _arm(t, "a", measured._writer(4 * KIB), records=64),
            _arm(t, "b", measured._writer(KIB), records=64),
        ),
        None,
        "the same records",
    ),
    "collective buffering turned off": Row(
        ("aggregation_off",),
        lambda t: access_pattern_guard(
            lib.CB, lib._arm(t, "a", lib._two_phase()), lib._arm(t, "p", lib._pieces())
        ),
        None,
        "aggregators' contiguous domains",
    ),
    "chunks serving the same shuffled samples": Row(
        ("larger_requests", "coalescing"),
        lambda t: _pattern(
            t, "l1.read_chunk_size", logical._threads(logical.ORDER, 1), logical._chunked(logical.ORDER)
        ),
        None,
        "shuffled order of the smaller requests",
    ),
    "a write buffer without evidence": Row(
        ("coalescing",),
        lambda t: _pattern(t, "l1.write_buffering", measured._writer(KIB), measured._writer(64 * KIB)),
        "inconclusive",
        "larger application record",
    ),
    "a steps counter does not pin eight records grouped in one write": Row(
        ("coalescing",),
        lambda t: _pattern(
            t,
            "l1.write_buffering",
            _arm(t, "a", measured._writer(KIB), steps=32),
            _arm(t, "b", measured._writer(8 * KIB), steps=32),
        ),
        "inconclusive",
        "larger application record",
    ),
    "larger calls under a loader's id": Row(
        ("larger_requests",),
        lambda t: _pattern(t, "l1.dataloader_workers", measured._writer(KIB), measured._writer(4 * KIB)),
        "rejected",
        "does not merge requests",
    ),
    "a chunked layout of the same rows": Row(
        ("relaid_requests", "relayout"),
        lambda t: access_pattern_guard(
            S["l2.hdf5_chunked_layout"],
            relayout._arm(t, "c", relayout._container(order=list(range(relayout.ROWS)))),
            relayout._arm(t, "k", relayout._container(chunk_rows=1, order=list(range(relayout.ROWS)))),
        ),
        None,
        "laid out 1 file(s) anew",
    ),
    "larger records behind a kept coalescing": Row(
        ("baseline_requests_lost",),
        lambda t: access_pattern_guard(
            S["l1.read_chunk_size"],
            logical._arm(t, "chunks", lambda: logical._chunked(logical.ORDER)),
            logical._arm(
                t,
                "larger",
                lambda: logical._threads(
                    random.Random(99).sample(range(logical.N // 4), logical.N // 4), 1, size=64 * KIB
                ),
            ),
            baseline=logical._arm(t, "base", lambda: logical._threads(logical.ORDER, 1)),
        ),
        "inconclusive",
        "records of 16.0 KiB",
    ),
}


@pytest.mark.parametrize("name", list(ROWS))
def test_each_signal_and_allowance(name: str, tmp_path: Path) -> None:
    row = ROWS[name]
    d = row.decide(tmp_path)
    assert (d.verdict if not d.passed else None) == row.verdict, d.reason
    assert row.says in d.reason, d.reason
    trail = d.details.get("signals", [])
    seen = {x["signal"] for x in trail} | {x.get("allowance") for x in trail}
    for covered in row.covers:
        assert covered in seen, (covered, trail)


def test_the_table_covers_every_signal_and_allowance_and_names_only_known_algorithms() -> None:
    rules = guard_rules()
    everything = {s.id for s in rules.signal} | {a.id for a in rules.allowance}
    covered = {c for row in ROWS.values() for c in row.covers}
    assert covered == everything, (everything - covered, covered - everything)
    named = {e for a in rules.allowance for e in a.evidence}
    assert named == set(EVIDENCE), named ^ set(EVIDENCE)
    assert {a.budget for a in rules.allowance if a.budget} == set(BUDGETS)


def test_every_threshold_says_why_and_where_from() -> None:
    for name, t in guard_rules().threshold.items():
        assert t.why and t.source, name
        assert getattr(guard_rules(), name) == t.value
