"""The access-pattern guard: changing what the application does is not an optimization.

Measured from the traces, whatever the strategy id says. The pattern that must not change is
the application's *logical* pattern (:mod:`logical`): the data files and byte ranges it touches,
the sizes of the requests it makes, and the order class of each of its streams (a thread of a
process), judged on a grid of blocks that survives coalescing. How many threads or processes
serve the requests, and how they are aggregated or split into calls, are not the pattern,
within what the strategy's checklist category allows (``resources/guards.toml``).

Larger requests over the same ranges are coalescing (allowed to a buffering strategy) or a
larger application record (a pattern change). They are settled by the application's own
evidence: the work counters it prints, application events with sizes, a shuffled request
sequence the larger requests follow block by block, or files read whole front to back (the
file is the request). Without any of these the decision is ``inconclusive`` and carries the
one question a person can answer; the change is never kept on its own.

Under a strategy whose library aggregates (collective buffering, data sieving), larger or smaller
calls over the same ranges are also settled by the library's own marks in the trace
(:mod:`library`): read-modify-write windows, read windows over the other arm's pieces, or
aggregators' contiguous domains where the other arm's processes interleave their pieces. Turning
such an aggregation on or off changes how the same requests are served, not what the application
asks for. When fewer bytes are read, all inside the incumbent's read windows, the trace cannot
tell the windows' holes from pieces the program stopped reading: ``inconclusive``.

An I/O library's layout strategy (HDF5 chunking, alignment, file-space pages) moves the same
bytes to other places in a file the application writes: such a file's positions are the
library's, so its ranges are not compared, and a change of its order class or call sizes
(whole chunks read for a row) is settled by the application's evidence or asked of a person.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from dftune.core.domain.verdicts import GuardDecision, not_run
from dftune.core.facts.paths import container_format
from dftune.tools.catalog import Strategy
from dftune.tools.guards.arms import Arm, Totals, sharing_inputs
from dftune.tools.guards.library import ReadWindows, read_windows, rmw_windows, sharing
from dftune.tools.guards.logical import LEVELS, Direction, compare, order_changed, own_order
from dftune.tools.guards.rules import Allowed, GuardRules, guard_rules
from dftune.tools.trace.model import FileAccess


def pattern_by_definition(strategy: Strategy) -> GuardDecision:
    """Rule 5 (dftracer-optimization-kb skill) before a run: a strategy marked a pattern change is refused."""
    if strategy.forbidden_kind == "access_pattern":
        return GuardDecision(
            guard="access_pattern",
            passed=False,
            verdict="rejected",
            reason=f"{strategy.id} changes the access pattern or transfer size: {strategy.forbidden_reason}",
        )
    return GuardDecision(
        guard="access_pattern",
        passed=True,
        reason=f"{strategy.id} is declared to keep the access pattern; the traces are compared "
        "after the experiment",
    )


def access_pattern_guard(
    strategy: Strategy,
    incumbent: Arm | None = None,
    experiment: Arm | None = None,
    *,
    baseline: Arm | None = None,
) -> GuardDecision:
    """The definition check alone (no arms), or the measured comparison of two traced arms; with the
    ``baseline``, larger requests the incumbent kept are also checked to still serve the baseline's."""
    declared = pattern_by_definition(strategy)
    if not declared.passed or incumbent is None or experiment is None:
        return declared
    if baseline is not None and baseline is not incumbent:
        incumbent, experiment, baseline = sharing_inputs(incumbent, experiment, baseline)
    else:
        incumbent, experiment = sharing_inputs(incumbent, experiment)
        baseline = incumbent if baseline is not None else None
    if not (incumbent.profiled and experiment.profiled):
        return not_run(
            "access_pattern",
            "the arms have no access profile (untraced?), so the byte ranges, "
            "order and transfer sizes were NOT compared",
        )
    decision = _Comparison(
        guard_rules(), guard_rules().allowed(strategy.checklist), incumbent, experiment
    ).decide()
    if decision.passed and baseline is not None and baseline is not incumbent and baseline.profiled:
        decision = _still_the_baselines_requests(baseline, incumbent, experiment, decision)
        if decision.passed:
            return _behind_the_kept_coalescing(strategy, baseline, incumbent, experiment, decision)
    return decision


def _behind_the_kept_coalescing(
    strategy: Strategy, base: Arm, inc: Arm, exp: Arm, decision: GuardDecision
) -> GuardDecision:
    """A kept change that merged requests into larger calls (buffering) shows its flushes, not the
    application's requests: an experiment with the incumbent's calls may still have changed the
    records behind them (4 KiB rows packed into 16 KiB records look the same through a 64 KiB
    buffer). Against the baseline, the experiment's larger calls must be settled by the same
    evidence the kept change's needed (work counters, application events, the baseline's shuffled
    order, files read whole); when they cannot be, neither can this change, and a person is asked."""
    rules = guard_rules()
    if not _calls_grew(base, inc, rules.size_ratio[1]):
        return decision  # nothing kept merges calls: the incumbent's trace shows the requests
    merging = rules.allowed(strategy.checklist).model_copy(update={"larger_calls": True})
    against = _Comparison(rules, merging, base, exp).decide()
    if against.verdict != "inconclusive":
        return decision
    question = str(against.details.get("question", ""))
    said = against.reason.removeprefix("inconclusive: ")
    return GuardDecision(
        guard="access_pattern",
        passed=False,
        verdict="inconclusive",
        details={**decision.details, "question": question, "against_baseline": against.details},
        reason=f"inconclusive: the same calls as the {inc.label}, whose kept change serves the "
        f"application's requests with larger calls; behind them the trace cannot tell whether this "
        f"change kept the baseline's requests. Against the baseline: {said}",
    )


def _calls_grew(base: Arm, inc: Arm, ratio: float) -> bool:
    """The incumbent's calls are larger than the baseline's in a direction (a kept change merges)."""
    for direction in ("read", "write"):
        before, after = base.mean_call_bytes(direction), inc.mean_call_bytes(direction)
        if before and after and after / before > ratio:
            return True
    return False


def _still_the_baselines_requests(base: Arm, inc: Arm, exp: Arm, decision: GuardDecision) -> GuardDecision:
    """A kept coalescing hides the application's request size from the incumbent's trace: the
    incumbent's larger requests were shown to follow the baseline's shuffled requests block by
    block; an experiment with requests as large as the incumbent's must still follow them, or its
    larger requests may be larger application records (a new sequence of its own)."""
    logs = (base.request_log, inc.request_log, exp.request_log)
    if any(log is None or not log.streams for log in logs):
        return decision
    for direction in ("read", "write"):
        kept = compare(base.request_log, inc.request_log, base.data_keys, inc.data_keys, direction)  # type: ignore[arg-type]
        now = compare(base.request_log, exp.request_log, base.data_keys, exp.data_keys, direction)  # type: ignore[arg-type]
        if kept is None or now is None or kept.follow is None or now.follow is None:
            continue
        if not kept.follow.follows or now.follow.follows:
            continue
        small, large = _kib(now.before.mean_size), _kib(now.after.mean_size)
        question = (
            f"The baseline {direction}s requests of {small}; the {inc.label} serves them with {direction}s "
            f"of {_kib(kept.after.mean_size)} in the same order, the experiment with {direction}s of "
            f"{large} in another order. Does the program still {direction} records of {small} (keep "
            f"it), or does each of its records now hold {large} (a different application request: "
            "refuse it)?"
        )
        details = {
            **decision.details,
            "question": question,
            "baseline_follows": {
                "incumbent": kept.details()["follows"],
                "experiment": now.details()["follows"],
            },
        }
        return GuardDecision(
            guard="access_pattern",
            passed=False,
            verdict="inconclusive",
            details=details,
            reason=f"inconclusive: the {inc.label}'s {direction}s "
            f"follow the baseline's shuffled {small} requests "
            f"block by block (rank correlation {kept.follow.with_finer:+.2f}), the experiment's do not "
            f"({now.follow.with_finer:+.2f}): its {large} requests may be larger application records. "
            f"Settled only by a person (a win stays on trial until then). {question}",
        )
    return decision


def _differing_bytes(f: FileAccess, g: FileAccess, direction: str) -> int:
    """How many bytes two arms' ranges of a file differ by: a whole-file access that only changed
    length differs by the length change; anything else by all of its bytes."""
    a, b = getattr(f, f"{direction}_unique_bytes"), getattr(g, f"{direction}_unique_bytes")
    whole = all(
        getattr(x, f"{direction}_segments") == 1 and getattr(x, f"{direction}_start") == 0 for x in (f, g)
    )
    return abs(a - b) if whole else max(a, b)


def _kib(x: float | None) -> str:
    return "-" if x is None else f"{x / 1024:,.1f} KiB"


class _Comparison:
    def __init__(self, rules: GuardRules, allowed: Allowed, inc: Arm, exp: Arm) -> None:
        self.rules, self.allowed, self.inc, self.exp = rules, allowed, inc, exp
        self.tol = rules.tolerance
        #: files whose ranges differ by a negligible share of the data moved (listed, not judged)
        self.negligible: list[str] = []
        #: files read at fewer ranges, all inside the incumbent's data-sieving read windows: the
        #: windows' holes or pieces the program stopped reading (a person decides)
        self.sieved: list[str] = []
        #: the logical comparison per direction (empty: an arm has no request log)
        self.logical: dict[str, Direction] = {}
        #: files the I/O library laid out anew (their positions are the library's, not compared)
        self.relaid = self._relaid()
        #: the sums over each arm's files whose positions are compared
        self.kept_inc, self.kept_exp = self._kept(inc), self._kept(exp)
        keys_inc = {p: k for p, k in inc.data_keys.items() if k not in self.relaid}
        keys_exp = {p: k for p, k in exp.data_keys.items() if k not in self.relaid}
        before, after = inc.request_log, exp.request_log
        if before is not None and after is not None and before.streams and after.streams:
            for direction in ("read", "write"):
                if (d := compare(before, after, keys_inc, keys_exp, direction)) is not None:
                    self.logical[direction] = d

    def _relaid(self) -> list[str]:
        """Files written in both arms, at other ranges but with at least the incumbent's bytes, under
        a strategy whose library may lay its files out anew (fewer bytes is never a new layout),
        that are the library's containers (HDF5, netCDF, ADIOS: by suffix or signature)."""
        if not self.allowed.relayout:
            return []
        out = []
        for name, f in self.inc.files.items():
            g = self.exp.files.get(name)
            if g is None or not f.write_bytes or not g.write_bytes or f.write_ranges == g.write_ranges:
                continue
            if g.write_unique_bytes < f.write_unique_bytes * (1 - self.tol):
                continue  # fewer bytes is never a new layout
            # a plain file's offsets are the application's, whatever the strategy says
            if container_format(f.path) or container_format(g.path):
                out.append(name)
        return out

    def _kept(self, arm: Arm) -> Totals:
        """The sums over the arm's data files whose positions are compared (all but the re-laid-out)."""
        if not self.relaid:
            return arm.totals
        return Totals.of(f for name, f in arm.files.items() if name not in self.relaid)

    def decide(self) -> GuardDecision:
        checks: list[Callable[[], str | None]] = [
            self._work_counters,
            self._files,
            self._ranges,
            self._order,
            self._visit_order,
        ]
        for check in checks:
            if (why := check()) is not None:
                return self._rejected(why)
        sized = self._sizes()
        if sized.passed and self.sieved:
            return self._sieved_question()
        return self._relayout() if sized.passed and self.relaid else sized

    @functools.cached_property
    def _windows(self) -> ReadWindows | None:
        """The incumbent's reads as data-sieving windows over the experiment's pieces (see
        :mod:`library`), read from the request logs once, when a range check asks."""
        return read_windows(self.inc, self.exp)

    def _sieved_question(self) -> GuardDecision:
        """Fewer bytes read, all inside the incumbent's sieving windows: a person decides."""
        rw = self._windows
        assert rw is not None
        name = self.sieved[0]
        f, g = self.inc.files[name], self.exp.files[name]
        return GuardDecision(
            guard="access_pattern",
            passed=False,
            verdict="inconclusive",
            details=self._details(),
            reason=(
                f"inconclusive: it reads fewer byte ranges of {len(self.sieved)} data file(s) (e.g. "
                f"{name}: {f.read_unique_bytes:,} -> {g.read_unique_bytes:,} bytes), all inside the "
                f"{self.inc.label}'s {rw.windows:,} data-sieving read windows; the trace cannot tell the "
                "holes the windows read between the pieces (bytes nobody asked for) from pieces the "
                "program no longer reads. Does the program still ask for the same data?"
            ),
        )

    # ----- the checks: each returns why the pattern changed, or None

    def _work_counters(self) -> str | None:
        changed = [
            f"{k} {self.inc.work[k]:g} -> {self.exp.work[k]:g}"
            for k in sorted(set(self.inc.work) & set(self.exp.work))
            if abs(self.exp.work[k] - self.inc.work[k]) > self.tol * max(abs(self.inc.work[k]), 1e-12)
        ]
        return f"the program reports different work: {'; '.join(changed)}" if changed else None

    def _library_read(self, name: str) -> bool:
        """Reads of a file the application writes, under a strategy whose library reads to modify."""
        f, g = self.inc.files.get(name), self.exp.files.get(name)
        return self.allowed.rmw_reads and any(x is not None and x.write_bytes > 0 for x in (f, g))

    def _files(self) -> str | None:
        for direction in ("read", "write"):
            have = {n for n, f in self.inc.files.items() if getattr(f, f"{direction}_bytes") > 0}
            got = {n for n, f in self.exp.files.items() if getattr(f, f"{direction}_bytes") > 0}
            gone, new = sorted(have - got), sorted(got - have)
            if direction == "read":
                gone = [n for n in gone if not self._library_read(n)]
                new = [n for n in new if not self._library_read(n)]
            if gone:
                return (
                    f"it no longer {direction}s {len(gone)} of the {len(have)} "
                    f"data files the {self.inc.label} {direction}s (e.g. {gone[0]})"
                )
            if new and not self.allowed.new_files:
                return (
                    f"it {direction}s {len(new)} data files the "
                    f"{self.inc.label} never {direction}s (e.g. {new[0]})"
                )
        return None

    def _ranges(self) -> str | None:
        scale = max(self.inc.data_bytes, self.exp.data_bytes, 1)
        for direction in ("read", "write"):
            differ, negligible, differing_bytes = [], [], 0
            for name, f in self.inc.files.items():
                g = self.exp.files.get(name)
                if g is None or getattr(f, f"{direction}_bytes") == 0 or name in self.relaid:
                    continue
                if getattr(f, f"{direction}_ranges") == getattr(g, f"{direction}_ranges"):
                    continue
                if direction == "read" and self._library_read(name):
                    continue
                grown = getattr(g, f"{direction}_unique_bytes") >= getattr(f, f"{direction}_unique_bytes")
                if direction == "read" and self.allowed.extend_ranges and grown:
                    continue  # a prefetcher may read ahead of what the incumbent read, never less
                if direction == "read" and self.allowed.rmw_reads and self._windows is not None:
                    self.sieved.append(name)  # fewer bytes, all inside the incumbent's read windows
                    continue
                differ.append(name)
                differing_bytes += _differing_bytes(f, g, direction)
            if differ and differing_bytes <= self.tol * scale:
                negligible, differ = differ, []  # e.g. a small report file whose length follows the settings
            self.negligible.extend(negligible)
            if differ:
                name = differ[0]
                f, g = self.inc.files[name], self.exp.files[name]
                total = sum(1 for x in self.inc.files.values() if getattr(x, f"{direction}_bytes") > 0)
                return (
                    f"it {direction}s different byte ranges of "
                    f"{len(differ)} of {total} data files (e.g. {name}: "
                    f"{getattr(f, f'{direction}_segments')} segment(s), "
                    f"{getattr(f, f'{direction}_unique_bytes'):,} "
                    f"bytes -> {getattr(g, f'{direction}_segments')} segment(s), "
                    f"{getattr(g, f'{direction}_unique_bytes'):,} bytes)"
                )
        return None

    def _order(self) -> str | None:
        if self.allowed.reorder:
            return None  # aggregators and read-modify-write reorder the calls of the same accesses
        if self.logical:
            return self._stream_order()
        before, after = self.kept_inc.random_share, self.kept_exp.random_share
        if before is None or after is None or abs(after - before) <= self.rules.order_tolerance:
            return None
        if self._served_rereads() and after < before:
            return None  # re-reads served from memory leave fewer out-of-order accesses
        return (
            f"the order within files changed: {100 * before:.0f}% -> {100 * after:.0f}% of the positioned "
            "accesses go backwards (random)"
        )

    def _stream_order(self) -> str | None:
        """Each stream's order class on the blocks both arms' requests share."""
        for direction, d in self.logical.items():
            for level, (b, a) in d.orders.items():
                if not order_changed(b, a):
                    continue
                if self._served_rereads() and (a.share or 0) < (b.share or 0):
                    continue  # re-reads served from memory leave fewer backward steps
                return (
                    f"the {direction} requests are visited in another "
                    f"order {level}: {100 * (b.share or 0):.0f}% "
                    f"-> {100 * (a.share or 0):.0f}% of each stream's "
                    f"steps {level} go backwards in (file, offset) "
                    f"order ({b.label} -> {a.label}; {b.streams} -> {a.streams} stream(s), {d.grid.blocks:,} "
                    "blocks that both arms' requests share)"
                )
        return None

    def _served_rereads(self) -> bool:
        """A cache may leave fewer backward steps only by serving re-reads: the experiment reads
        again less than the incumbent did (the same reads in file order are a removed shuffle)."""
        before, after = self.inc.totals.reread_bytes, self.exp.totals.reread_bytes
        return self.allowed.serve_rereads and before > 0 and after < before * (1 - self.tol)

    def _visit_order(self) -> str | None:
        if self.logical:
            return None  # the order across files is part of each stream's order
        n = self.rules.min_files_for_order
        before, after = self.inc.visit_order(n), self.exp.visit_order(n)
        if before is None or after is None or abs(after - before) <= self.rules.visit_order_tolerance:
            return None
        return (
            f"the files are visited in another order: the correlation of the visiting order with the "
            f"name order went {before:+.2f} -> {after:+.2f} (a shuffle added or removed?)"
        )

    # ----- transfer sizes, and the evidence that settles larger calls

    def _records_pinned(self) -> bool:
        """The program reports the same work counters in both arms (its own records are unchanged)."""
        return bool(self.inc.work) and set(self.inc.work) == set(self.exp.work)

    def _sizes(self) -> GuardDecision:
        lo, hi = self.rules.size_ratio
        larger: list[str] = []
        served: list[str] = []
        for direction in ("read", "write"):
            before, after = self._mean_request(direction)
            if before is None or after is None or before == 0:
                continue
            if direction == "read" and all(
                self._library_read(n)
                for arm in (self.inc, self.exp)
                for n, f in arm.files.items()
                if f.read_bytes
            ):
                continue  # reads the I/O library makes to modify what the application writes
            ratio = after / before
            moved = f"{direction} calls {_kib(before)} -> {_kib(after)} on average"
            if ratio < lo and self.allowed.larger_calls and self._records_pinned():
                larger.append(direction)  # the same records, aggregated differently (work counters pin them)
                continue
            if ratio < lo and self._follows(direction):
                continue  # the same shuffled requests, each split into smaller calls
            shrunk = ratio < lo and self.allowed.larger_calls
            why = self._aggregated(direction, self.inc, self.exp) if shrunk else None
            if why is not None:
                served.append(f"{moved}: {why}")  # the library no longer aggregates them
                continue
            if ratio < lo:
                return self._rejected(
                    f"the calls got smaller ({moved}): splitting requests changes what the "
                    "application asks for"
                )
            if ratio > hi:
                larger.append(direction)
                if not self.allowed.larger_calls:
                    return self._rejected(
                        f"the calls got larger ({moved}) but this kind of change "
                        f"({self.allowed.why.split(':', 1)[0]}) does not merge requests: a "
                        "transfer-size change"
                    )
        if not larger and served:
            return self._passed(
                f"the same data files, byte ranges and order as the {self.inc.label}, served without "
                f"the library's aggregation: {'; '.join(served)}"
            )
        if not larger:
            return self._passed(
                f"the same data files, byte ranges, order and transfer sizes as the {self.inc.label}"
            )
        return self._coalescing(larger)

    def _aggregated(self, direction: str, coarse: Arm, fine: Arm) -> str | None:
        """The library's marks on the ``coarse`` arm's larger calls, against the ``fine`` arm's
        (see :mod:`library`), or None: read-modify-write windows the fine arm no longer makes,
        read windows over the fine arm's pieces, or aggregators' contiguous domains where the fine
        arm's processes interleave."""
        if direction == "write":
            had, has = rmw_windows(coarse), rmw_windows(fine)
            if had.share >= 0.5 and has.calls < 0.5 * had.calls:
                return (
                    f"the {coarse.label}'s writes were the library's read-modify-write windows ("
                    f"{had.calls:,} writes of a range the same process had just read, {had.share:.0%} of "
                    f"its write bytes: data sieving), the {fine.label}'s {has.calls:,}"
                )
        if direction == "read" and (rw := read_windows(coarse, fine)) is not None:
            return (
                f"the {coarse.label}'s reads were the library's sieving windows ({rw.windows:,} reads, "
                f"each over several of the {fine.label}'s {rw.pieces:,} pieces and the holes between "
                "them: data sieving)"
            )
        spread, domains = sharing(fine, direction), sharing(coarse, direction)
        if spread is None or spread.share is None or spread.share < 0.5:
            return None
        few = domains.streams if domains is not None else 0
        if few >= spread.streams or (domains is not None and (domains.share or 0.0) >= 0.1):
            return None
        return (
            f"the {coarse.label}'s calls were aggregators' contiguous domains ({few} process(es) "
            f"per file: two-phase I/O), where the {fine.label}'s {spread.streams} processes interleave "
            f"their own pieces ({spread.share:.0%} of its {direction} calls lie among another's)"
        )

    def _mean_request(self, direction: str) -> tuple[float | None, float | None]:
        """Mean request size of each arm: from the request log (the highest layer traced) when both
        arms have one, else the mean call size of the data files."""
        d = self.logical.get(direction)
        if d is not None:
            return d.before.mean_size, d.after.mean_size
        if self.logical:
            return None, None  # the log has no request in this direction in one of the arms
        return self.kept_inc.mean_call_bytes(direction), self.kept_exp.mean_call_bytes(direction)

    def _follows(self, direction: str) -> bool:
        """The coarser arm touches the blocks in the finer arm's shuffled order: the same requests."""
        d = self.logical.get(direction)
        return d is not None and d.follow is not None and d.follow.follows

    def _question(self, directions: list[str]) -> str:
        """The one question that settles larger requests the trace cannot tell apart."""
        parts = []
        for d in directions:
            before, after = self._mean_request(d)
            parts.append(f"{d}s {_kib(before)} -> {_kib(after)}")
        d0 = directions[0]
        before, after = self._mean_request(d0)
        return (
            f"The {' and '.join(parts)} per call over the same byte ranges. Does the program still "
            f"{d0} records of {_kib(before)} and only group them into larger calls (buffering or "
            f"chunking: keep it), or does each of its records now hold {_kib(after)} (a different "
            "application request: refuse it)?"
        )

    def _order_evidence(self, directions: list[str]) -> str:
        """What the order of the blocks says about larger requests (it did not settle them)."""
        follows = [
            x.follow for d in directions if (x := self.logical.get(d)) is not None and x.follow is not None
        ]
        if not follows:
            return "the trace has no request log to compare the order of the requests"
        f = follows[0]
        if not f.distinctive:
            return "the requests come in file order, which requests of any size follow"
        if f.departs:
            return (
                "the larger requests come in an order of their "
                f"own (rank correlation {f.with_finer:+.2f} with "
                "the smaller requests' shuffled order: a new sequence, or one that is not seeded)"
            )
        return (
            f"the larger requests only partly follow the smaller requests' shuffled order (rank correlation "
            f"{f.with_finer:+.2f})"
        )

    def _coalescing(self, directions: list[str]) -> GuardDecision:
        moved = "; ".join(
            f"{d} {_kib(self._mean_request(d)[0])} -> {_kib(self._mean_request(d)[1])}" for d in directions
        )
        same_ranges = f"larger calls ({moved} on average) over the same byte ranges"
        if self._records_pinned():
            counters = ", ".join(f"{k} {v:g}" for k, v in sorted(self.exp.work.items()))
            return self._passed(
                f"the same records in differently sized calls ({moved} on average) over the same "
                f"byte ranges: the program reports the same work ({counters})"
            )
        events = self._app_event_change()
        if events is not None:
            if events:
                return self._rejected(f"{same_ranges}, but the application's own events changed: {events}")
            return self._passed(
                f"coalescing: {same_ranges}, and the application's own events (with their "
                "sizes) are unchanged"
            )
        marks = (
            [self._aggregated(d, self.exp, self.inc) for d in directions] if self.allowed.larger_calls else []
        )
        if marks and all(marks):
            return self._passed(f"the library's aggregation: {same_ranges}; {'; '.join(map(str, marks))}")
        if all(self._follows(d) for d in directions):
            f = self.logical[directions[0]].follow
            assert f is not None
            return self._passed(
                f"coalescing: {same_ranges}, touching {f.blocks:,} blocks in the shuffled order "
                f"of the smaller requests (rank correlation {f.with_finer:+.2f}): the same "
                "requests served by larger calls"
            )
        if directions == ["read"] and self._read_whole():
            return self._passed(
                f"read buffering: {same_ranges}; every file is read whole, front to back, so "
                "the request is the file and only the calls that serve it changed"
            )
        details = self._details()
        details["question"] = self._question(directions)
        seen = self._order_evidence(directions)
        return GuardDecision(
            guard="access_pattern",
            passed=False,
            verdict="inconclusive",
            details=details,
            reason=f"inconclusive: {same_ranges}; the trace cannot tell coalescing (allowed) from a larger "
            f"application record (an access-pattern change): {seen}, and there is no application-level "
            "evidence (work counters in the workload spec, or application events with sizes). "
            f"Settled only by a person (a win stays on trial until then). {details['question']}",
        )

    def _relayout(self) -> GuardDecision:
        """The re-laid-out files: the same order class and call sizes pass. Other call sizes (whole
        chunks or pages for a row) are the library's or the application's: its work counters or
        events settle them. Another order class is never the layout's to prove (counters do not
        carry order): without application events that show the same requests, a person decides."""
        lo, hi = self.rules.size_ratio
        order = self._relaid_order()
        sizes: list[str] = []
        for name in self.relaid:
            f, g = self.inc.files[name], self.exp.files[name]
            for direction in ("read", "write"):
                b, a = Totals.of([f]).mean_call_bytes(direction), Totals.of([g]).mean_call_bytes(direction)
                if b and a and not lo <= a / b <= hi:
                    sizes.append(f"{name}: {direction} calls {_kib(b)} -> {_kib(a)} on average")
        first = self.relaid[0]
        laid = (
            f"the I/O library laid out {len(self.relaid)} file(s) anew (e.g. {first}: "
            f"{self.inc.files[first].write_segments} -> {self.exp.files[first].write_segments} "
            "written segment(s), at least the same bytes)"
        )
        if not order and not sizes:
            return self._passed(f"{laid}; the same order class and call sizes")
        seen = "; ".join((order + sizes)[:3])
        events = self._app_event_change()
        if events:
            return self._rejected(f"{laid}, and the application's own events changed: {events}")
        if events == "":
            return self._passed(f"{laid}; {seen}; the application's own events are unchanged")
        if not order and self._records_pinned():
            return self._passed(f"{laid}; {seen}; the program reports the same work")
        details = self._details()
        details["question"] = (
            f"The trace shows the file system calls only: {seen}. Does the change only alter how "
            "the I/O library stores and fetches the same data (chunks, alignment, pages, its "
            "cache: keep it), or does the program now ask for other data, in other sizes or in "
            "another order (refuse it)?"
        )
        evidence = (
            "the work counters cannot show an order"
            if order
            else "there is no application-level evidence (work counters in the workload spec, or "
            "application events with sizes)"
        )
        return GuardDecision(
            guard="access_pattern",
            passed=False,
            verdict="inconclusive",
            details=details,
            reason=f"inconclusive: {laid}; the trace cannot tell the library's new layout from a "
            f"change in the application's requests: {seen}; {evidence}. Settled only by a person "
            f"(a win stays on trial until then). {details['question']}",
        )

    def _relaid_order(self) -> list[str]:
        """How the order class of the re-laid-out files changed: per stream and direction on each
        arm's own blocks (request logs), else the share of backward accesses per file."""
        keys = set(self.relaid)
        log_i, log_e = self.inc.request_log, self.exp.request_log
        if log_i is not None and log_e is not None and log_i.streams and log_e.streams:
            out = []
            for direction in ("read", "write"):
                b, a = (
                    own_order(log, {p: k for p, k in arm.data_keys.items() if k in keys}, direction)
                    for log, arm in ((log_i, self.inc), (log_e, self.exp))
                )
                for level in LEVELS:
                    if order_changed(b[level], a[level]):
                        out.append(
                            f"{direction}s {level}: {100 * (b[level].share or 0):.0f}% -> "
                            f"{100 * (a[level].share or 0):.0f}% of each stream's steps go backwards"
                        )
            return out
        out = []
        for name in self.relaid:
            before = Totals.of([self.inc.files[name]]).random_share
            after = Totals.of([self.exp.files[name]]).random_share
            if before is not None and after is not None and abs(after - before) > self.rules.order_tolerance:
                out.append(f"{name}: {100 * before:.0f}% -> {100 * after:.0f}% of the accesses go backwards")
        return out

    def _app_event_change(self) -> str | None:
        """None: no application events with sizes to compare; '' unchanged; else what changed."""
        before = {(e.cat, e.name): e for e in self.inc.analysis.profile.app_events if e.size_sum is not None}  # type: ignore[union-attr]
        after = {(e.cat, e.name): e for e in self.exp.analysis.profile.app_events if e.size_sum is not None}  # type: ignore[union-attr]
        if not before or not after:
            return None
        changed = []
        for key in sorted(set(before) | set(after)):
            b, a = before.get(key), after.get(key)
            if b is None or a is None:
                changed.append(f"{key[1]} {'appeared' if b is None else 'disappeared'}")
            elif a.count != b.count or abs((a.size_sum or 0) - (b.size_sum or 0)) > self.tol * max(
                b.size_sum or 0, 1
            ):
                changed.append(
                    f"{key[1]} {b.count} events / {b.size_sum:,} bytes -> {a.count} / {a.size_sum:,}"
                )
        return "; ".join(changed)

    def _read_whole(self) -> bool:
        files = [
            (self.inc.files[n], g) for n, g in self.exp.files.items() if n in self.inc.files and g.read_bytes
        ]
        return bool(files) and all(
            x.read_segments == 1 and x.read_start == 0 and x.random == 0 for pair in files for x in pair
        )

    # ----- results

    def _details(self) -> dict[str, object]:
        return {
            "incumbent": {
                "files": len(self.inc.files),
                "random_share": self.inc.totals.random_share,
                "mean_read_bytes": self.inc.mean_call_bytes("read"),
                "mean_write_bytes": self.inc.mean_call_bytes("write"),
            },
            "experiment": {
                "files": len(self.exp.files),
                "random_share": self.exp.totals.random_share,
                "mean_read_bytes": self.exp.mean_call_bytes("read"),
                "mean_write_bytes": self.exp.mean_call_bytes("write"),
            },
            "allowed": self.allowed.model_dump(),
            "relaid_out": self.relaid[:20],
            "negligible_range_changes": self.negligible[:20],
            "logical": {d: x.details() for d, x in self.logical.items()},
        }

    def _rejected(self, why: str) -> GuardDecision:
        return GuardDecision(
            guard="access_pattern",
            passed=False,
            verdict="rejected",
            details=self._details(),
            reason=f"changes what the application does, whatever its strategy id says: {why}",
        )

    def _passed(self, why: str) -> GuardDecision:
        return GuardDecision(guard="access_pattern", passed=True, details=self._details(), reason=why)
