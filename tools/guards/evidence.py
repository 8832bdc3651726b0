"""What settles a signal: the evidence and budgets the allowances of resources/guards.toml name,
and the one loop both measuring guards run over what they found (:func:`judge`).

A :class:`Case` holds the arms one decision compares (baseline, incumbent, experiment) and reads
each piece of evidence once, when an allowance first asks for it: the library's marks
(:mod:`library`), the logical comparison of the requests (:mod:`logical`), the program's own
account of its work. A :class:`Found` is one signal with its numbers. For each, the allowances
the strategy's category may use are tried in file order: one whose budget holds and whose
evidence shows explains it (or, for an allowance only a person can confirm, asks); evidence that
refutes it refuses the change; an allowance that asks without its evidence asks; otherwise the
signal stands and the change is refused.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from dftune.tools.guards.arms import Arm, Totals
from dftune.tools.guards.library import ReadWindows, read_windows, repeats, rmw_windows, sharing
from dftune.tools.guards.logical import LEVELS, Direction, compare, order_changed, own_order
from dftune.tools.guards.rules import Allowance, GuardRules


@dataclass(frozen=True)
class Found:
    """One signal a comparison shows, with its numbers."""

    signal: str
    #: what was seen, with the numbers
    text: str
    #: how much it moved (bytes or calls fewer, the change of a share), for budgets and evidence
    amount: float = 0.0
    #: the incumbent's (or baseline's) value it moved from
    before: float = 0.0
    #: what it is about: a metric key, a data file
    key: str = ""
    #: the direction(s) it is about ("read", "write", "read+write")
    direction: str = ""
    #: the question for a person, when only a person can settle it
    question: str = ""
    #: the sentence that refuses it, when it says more than ``text``
    refusal: str = ""

    @property
    def refused(self) -> str:
        return self.refusal or self.text


#: An evidence's answer: ("shows" | "refutes", the sentence), or None (it does not speak).
Said = tuple[Literal["shows", "refutes"], str] | None
#: A budget: how much of a signal an allowance may explain, and what that is, or None (nothing).
Budget = tuple[float, str] | None


@dataclass(frozen=True)
class Outcome:
    """What one signal comes to, and the allowance that decided it (None: none did)."""

    kind: Literal["explained", "asked", "refused"]
    sentence: str
    question: str = ""
    allowance: Allowance | None = None


@dataclass
class Case:
    """The arms one decision compares, and the evidence read from them (each piece once)."""

    rules: GuardRules
    checklist: int | None
    base: Arm
    inc: Arm
    exp: Arm
    tol: float
    #: files an I/O library laid out anew (their positions are the library's, not compared)
    relaid: list[str] = field(default_factory=list)

    @functools.cached_property
    def by_file(self) -> bool:
        """Compare per data file only when every arm has its access profile (else the summaries)."""
        return all(a.profiled and a.files for a in (self.base, self.inc, self.exp))

    def allows(self, allowance: str) -> bool:
        return self.rules.allows(allowance, self.checklist)

    # ----- the library's marks

    def passes_kept(self, before: Arm, after: Arm, direction: str) -> float | None:
        """``before``'s passes over its own bytes when each process of ``after`` still moves its
        bytes as many times over (within the slack), else None."""
        b, a = repeats(before, direction), repeats(after, direction)
        return b if b is not None and a is not None and a >= b * (1 - self.rules.pass_slack) else None

    def read_sieving(self, coarse: Arm, fine: Arm) -> tuple[ReadWindows, float] | None:
        """The ``coarse`` arm's read windows over the ``fine`` arm's pieces, with the passes kept."""
        rw = read_windows(coarse, fine)
        passes = self.passes_kept(coarse, fine, "read") if rw is not None else None
        return (rw, passes) if rw is not None and passes is not None else None

    @functools.cached_property
    def windows(self) -> ReadWindows | None:
        """The incumbent's reads as sieving windows over the experiment's pieces (passes or not)."""
        return read_windows(self.inc, self.exp)

    def aggregated(self, direction: str, coarse: Arm, fine: Arm) -> str | None:
        """The library's marks on the ``coarse`` arm's larger calls, against the ``fine`` arm's:
        read-modify-write windows the fine arm no longer makes, read windows over the fine arm's
        pieces, or aggregators' contiguous domains where the fine arm's processes interleave."""
        if direction == "write":
            had, has = rmw_windows(coarse), rmw_windows(fine)
            if had.share >= self.rules.sieving_share and has.calls < self.rules.dropped_share * had.calls:
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
        if spread is None or spread.share is None or spread.share < self.rules.interleaved_share:
            return None
        few = domains.streams if domains is not None else 0
        if few >= spread.streams or (
            domains is not None and (domains.share or 0.0) >= self.rules.domain_overlap
        ):
            return None
        return (
            f"the {coarse.label}'s calls were aggregators' contiguous domains ({few} process(es) "
            f"per file: two-phase I/O), where the {fine.label}'s {spread.streams} processes interleave "
            f"their own pieces ({spread.share:.0%} of its {direction} calls lie among another's)"
        )

    # ----- the program's own account of its work

    def passes_shown(self, inc: Arm, exp: Arm) -> str | None:
        """What shows that ``exp`` still makes ``inc``'s passes over its data (a cache serves the
        re-reads; a program doing fewer epochs drops them too, and its trace looks the same): the
        work counters it prints, epochs or steps in the trace, or its most frequent application
        event (per sample or per step, as a rule), each kept within the tolerance; or a change that
        reaches the program only as its I/O calls' arguments (:attr:`Arm.library_only`)."""
        tol = self.tol
        if exp.library_only:  # what exp changed cannot reach the code that decides the passes
            return exp.library_only
        if inc.work and all(exp.work.get(k, 0.0) >= v * (1 - tol) for k, v in inc.work.items()):
            return f"its work counters are kept ({', '.join(sorted(inc.work))})"
        a, e = inc.analysis, exp.analysis
        if a.epochs and len(e.epochs) >= len(a.epochs):
            return f"its {len(a.epochs)} epoch(s) are kept"
        if a.steps and e.steps >= a.steps * (1 - tol):
            return f"its {a.steps:,} steps are kept"
        events = a.profile.app_events if a.profile is not None else []
        most = max(events, key=lambda ev: ev.count, default=None)
        if most is None or most.count < 2 or e.profile is None:
            return None
        now = sum(ev.count for ev in e.profile.app_events if (ev.cat, ev.name) == (most.cat, most.name))
        if now < most.count * (1 - tol):
            return None
        return f"its most frequent application event is kept ({most.name}: {most.count:,} -> {now:,})"

    def records_counted(self, calls: list[int]) -> str | None:
        """A work counter that counts the program's records, the same in both arms: the incumbent's
        requests (``calls``, per direction) are a small whole multiple of it (a record may take a
        header and a body). A count of steps or files says nothing of a record's size."""
        inc, exp, r = self.inc.work, self.exp.work, self.rules
        if not inc or set(inc) != set(exp) or not calls:
            return None
        for name, v in sorted(inc.items()):
            if v <= 0 or abs(exp[name] - v) > self.tol * v:
                continue
            ratios = [n / v for n in calls]
            if all(
                1 <= round(x) <= r.calls_per_record and abs(x - round(x)) <= r.record_count_slack * x
                for x in ratios
            ):
                return name
        return None

    def requests(self, direction: str) -> int:
        """The incumbent's requests in a direction (its calls on the compared files, without a log)."""
        d = self.logical.get(direction)
        return d.before.count if d is not None else int(getattr(self.kept(self.inc), f"{direction}_calls"))

    @functools.cached_property
    def app_event_change(self) -> str | None:
        """None: no application events with sizes to compare; '' unchanged; else what changed."""
        pi, pe = self.inc.analysis.profile, self.exp.analysis.profile
        before = {(e.cat, e.name): e for e in (pi.app_events if pi else []) if e.size_sum is not None}
        after = {(e.cat, e.name): e for e in (pe.app_events if pe else []) if e.size_sum is not None}
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

    # ----- the logical comparison (request logs)

    @functools.cached_property
    def logical(self) -> dict[str, Direction]:
        """Each direction's logical comparison on the files whose positions are compared."""
        before, after = self.inc.request_log, self.exp.request_log
        if before is None or after is None or not before.streams or not after.streams:
            return {}
        keys_inc = {p: k for p, k in self.inc.data_keys.items() if k not in self.relaid}
        keys_exp = {p: k for p, k in self.exp.data_keys.items() if k not in self.relaid}
        out = {}
        for direction in ("read", "write"):
            if (d := compare(before, after, keys_inc, keys_exp, direction)) is not None:
                out[direction] = d
        return out

    def follows(self, direction: str) -> bool:
        """The coarser arm touches the blocks in the finer arm's shuffled order: the same requests."""
        d = self.logical.get(direction)
        return d is not None and d.follow is not None and d.follow.follows

    def kept(self, arm: Arm) -> Totals:
        """The sums over the arm's data files whose positions are compared (all but the re-laid)."""
        if not self.relaid:
            return arm.totals
        return Totals.of(f for name, f in arm.files.items() if name not in self.relaid)

    def mean_request(self, direction: str) -> tuple[float | None, float | None]:
        """Mean request size of each arm: from the request log (the highest layer traced) when both
        arms have one, else the mean call size of the data files compared."""
        d = self.logical.get(direction)
        if d is not None:
            return d.before.mean_size, d.after.mean_size
        if self.logical:
            return None, None  # the log has no request in this direction in one of the arms
        return self.kept(self.inc).mean_call_bytes(direction), self.kept(self.exp).mean_call_bytes(direction)

    def library_read(self, name: str) -> bool:
        """Reads of a file the application writes, under a strategy whose library reads to modify."""
        f, g = self.inc.files.get(name), self.exp.files.get(name)
        return self.allows("library_rmw_reads") and any(x is not None and x.write_bytes > 0 for x in (f, g))

    def relaid_order(self) -> list[str]:
        """How the order class of the re-laid-out files changed: per stream and direction on each
        arm's own blocks (request logs), else the share of backward accesses per file."""
        keys = set(self.relaid)
        log_i, log_e = self.inc.request_log, self.exp.request_log
        out = []
        if log_i is not None and log_e is not None and log_i.streams and log_e.streams:
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
        for name in self.relaid:
            before = Totals.of([self.inc.files[name]]).random_share
            after = Totals.of([self.exp.files[name]]).random_share
            if before is not None and after is not None and abs(after - before) > self.rules.order_tolerance:
                out.append(f"{name}: {100 * before:.0f}% -> {100 * after:.0f}% of the accesses go backwards")
        return out

    def relaid_sizes(self) -> list[str]:
        """The re-laid-out files whose call sizes changed beyond the size band."""
        lo, hi = self.rules.size_ratio_low, self.rules.size_ratio_high
        out = []
        for name in self.relaid:
            f, g = self.inc.files[name], self.exp.files[name]
            for direction in ("read", "write"):
                b, a = Totals.of([f]).mean_call_bytes(direction), Totals.of([g]).mean_call_bytes(direction)
                if b and a and not lo <= a / b <= hi:
                    out.append(f"{name}: {direction} calls {kib(b)} -> {kib(a)} on average")
        return out


def kib(x: float | None) -> str:
    return "-" if x is None else f"{x / 1024:,.1f} KiB"


# ------------------------------------------------------------------------------------ evidence
# Each takes the case and the signal found, and says what shows (or refutes) the allowance.


def _reads_of_written_files(c: Case, f: Found) -> Said:
    if f.signal in ("fewer_read_calls", "fewer_read_bytes"):
        ok = c.by_file and c.inc.totals.files_written > 0
    elif f.signal in ("smaller_requests", "larger_requests"):
        reading = [n for arm in (c.inc, c.exp) for n, x in arm.files.items() if x.read_bytes]
        ok = all(c.library_read(n) for n in reading)
    else:
        ok = c.library_read(f.key)
    if not ok or "read" not in f.direction.split("+"):
        return None
    return "shows", "the I/O library's read-modify-write reads of the files it writes"


def _touched_in_another_replicate(c: Case, f: Found) -> Said:
    """A file the analyzed replicate of one arm lacks that another replicate of it touched: the
    tracer lost the events (a thread's last ones), the program did not leave the file out."""
    arm = c.exp if f.signal == "files_gone" else c.inc
    if f.key and f.key in arm.seen_keys(f.direction):
        return "shows", f"another replicate of the {arm.label} {f.direction}s {f.key}: events the tracer lost"
    return None


def _passes_shown(c: Case, f: Found) -> Said:
    shown = c.passes_shown(c.inc, c.exp)
    return ("shows", shown) if shown is not None else None


def _rereads_of_outputs(c: Case, f: Found) -> Said:
    """Re-reads of files the program writes are its read-backs (or its I/O library's), not passes
    over a dataset: dropping them is no lost pass when the inputs' reads are kept."""
    i, a = c.inc.totals.input_read_bytes, c.exp.totals.input_read_bytes
    inputs_read_less = c.inc.totals.input_reread_bytes > 0 and a < i * (1 - c.tol)
    return None if inputs_read_less else ("shows", "")


def _rereads_served(c: Case, f: Found) -> Said:
    """Fewer backward steps from a cache serving re-reads: the experiment reads again less than the
    incumbent did (the same reads in file order are a removed shuffle)."""
    before, after = c.inc.totals.reread_bytes, c.exp.totals.reread_bytes
    served = f.amount < 0 and before > 0 and after < before * (1 - c.tol)
    return ("shows", "") if served else None


def _reads_grew(c: Case, f: Found) -> Said:
    grown = c.exp.files[f.key].read_unique_bytes >= c.inc.files[f.key].read_unique_bytes
    return ("shows", "") if f.direction == "read" and grown else None


def _inside_read_windows(c: Case, f: Found) -> Said:
    return ("shows", "") if f.direction == "read" and c.windows is not None else None


def _records_pinned(c: Case, f: Found) -> Said:
    counter = c.records_counted([c.requests(d) for d in f.direction.split("+") if d])
    if counter is None:
        return None
    return (
        "shows",
        f"the program reports the same work ({counter} {c.exp.work[counter]:g}, as many as its records)",
    )


def _records_pinned_sizes(c: Case, f: Found) -> Said:
    """Counters pin the re-laid files' records (their sizes), never their order."""
    if c.relaid_order():
        return None
    t = Totals.of(c.inc.files[n] for n in c.relaid)
    counter = c.records_counted([n for n in (t.read_calls, t.write_calls) if n])
    if counter is None:
        return None
    return (
        "shows",
        f"the program reports the same work ({counter} {c.exp.work[counter]:g}, as many as its records)",
    )


def _app_events_unchanged(c: Case, f: Found) -> Said:
    events = c.app_event_change
    if events is None:
        return None
    if events:
        return "refutes", f"the application's own events changed: {events}"
    return "shows", "the application's own events (with their sizes) are unchanged"


def _library_marks(c: Case, f: Found) -> Said:
    marks = [c.aggregated(d, c.exp, c.inc) for d in f.direction.split("+")]
    return ("shows", "the library's aggregation: " + "; ".join(map(str, marks))) if all(marks) else None


def _incumbent_library_marks(c: Case, f: Found) -> Said:
    why = c.aggregated(f.direction, c.inc, c.exp)
    return ("shows", why) if why is not None else None


def _follows_shuffled_order(c: Case, f: Found) -> Said:
    directions = f.direction.split("+")
    if not all(c.follows(d) for d in directions):
        return None
    follow = c.logical[directions[0]].follow
    assert follow is not None
    return "shows", (
        f"touching {follow.blocks:,} blocks in the shuffled order of the smaller requests (rank "
        f"correlation {follow.with_finer:+.2f}): the same requests served by larger calls"
    )


def _files_read_whole(c: Case, f: Found) -> Said:
    if f.direction != "read":
        return None
    files = [(c.inc.files[n], g) for n, g in c.exp.files.items() if n in c.inc.files and g.read_bytes]
    whole = bool(files) and all(
        x.read_segments == 1 and x.read_start == 0 and x.random == 0 for pair in files for x in pair
    )
    if not whole:
        return None
    return "shows", (
        "read buffering: every file is read whole, front to back, so the request is the file and only "
        "the calls that serve it changed"
    )


def _relaid_same_requests(c: Case, f: Found) -> Said:
    return None if c.relaid_order() or c.relaid_sizes() else ("shows", "the same order class and call sizes")


EVIDENCE: dict[str, Callable[[Case, Found], Said]] = {
    "reads_of_written_files": _reads_of_written_files,
    "passes_shown": _passes_shown,
    "touched_in_another_replicate": _touched_in_another_replicate,
    "rereads_of_outputs": _rereads_of_outputs,
    "rereads_served": _rereads_served,
    "reads_grew": _reads_grew,
    "inside_read_windows": _inside_read_windows,
    "records_pinned": _records_pinned,
    "records_pinned_sizes": _records_pinned_sizes,
    "app_events_unchanged": _app_events_unchanged,
    "library_marks": _library_marks,
    "incumbent_library_marks": _incumbent_library_marks,
    "follows_shuffled_order": _follows_shuffled_order,
    "files_read_whole": _files_read_whole,
    "relaid_same_requests": _relaid_same_requests,
}

# ------------------------------------------------------------------------------------ budgets


def _rereads(c: Case, f: Found) -> Budget:
    """The bytes the incumbent reads more than once (a cache may skip those, not data)."""
    rereads = float(c.inc.totals.reread_bytes) if c.by_file else 0.0
    limit = rereads * (1 + c.tol) + c.tol * f.before
    return limit, f"the {rereads:,.0f} bytes the {c.inc.label} reads more than once"


def _rmw_windows(c: Case, f: Found) -> Budget:
    """The incumbent's read-modify-write windows the experiment no longer makes: their bytes, or the
    locks around them (two a window)."""
    had = rmw_windows(c.inc) if c.by_file else None
    if had is None or not had.calls or rmw_windows(c.exp).calls >= c.rules.dropped_share * had.calls:
        return None
    if c.passes_kept(c.inc, c.exp, "write") is None:
        return None
    if f.signal == "fewer_metadata_calls":
        return (
            2 * had.calls + c.rules.call_slack,
            f"the locks around the {c.inc.label}'s {had.calls:,} windows",
        )
    return had.bytes * (1 + c.tol), (
        f"the {had.bytes:,} bytes of the {c.inc.label}'s {had.calls:,} read-modify-write windows "
        "(data sieving writes back the holes around the pieces)"
    )


def _read_holes(c: Case, f: Found) -> Budget:
    """The holes the incumbent's read windows read between each process's own pieces."""
    got = c.read_sieving(c.inc, c.exp) if c.by_file else None
    if got is None:
        return None
    held, passes = got
    return held.holes * passes * (1 + c.tol), (
        f"the {held.holes:,} bytes the {c.inc.label}'s {held.windows:,} sieving windows read between "
        f"each process's own pieces, {passes:.2g} time(s) over (data sieving reads the holes)"
    )


def _baseline_file_holes(c: Case, f: Found) -> Budget:
    """The bytes the baseline's read windows held beyond every piece the experiment reads."""
    got = c.read_sieving(c.base, c.exp) if f.key == "input_bytes_read_once" and c.by_file else None
    if got is None:
        return None
    held = got[0]
    return held.file_holes * (1 + c.tol), (
        f"the baseline's {held.windows:,} reads were data-sieving windows holding every byte of the "
        f"experiment's {held.pieces:,} reads"
    )


BUDGETS: dict[str, Callable[[Case, Found], Budget]] = {
    "rereads": _rereads,
    "rmw_windows": _rmw_windows,
    "read_holes": _read_holes,
    "baseline_file_holes": _baseline_file_holes,
}

# ------------------------------------------------------------------------------------ the loop

#: An allowance's question for a person: (the sentence, the question), from the case and signal.
Question = Callable[[Case, Found, str], tuple[str, str]]


def explain(c: Case, f: Found, questions: Mapping[str, Question]) -> Outcome:
    """What one signal comes to (see the module docstring)."""
    beyond: str | None = None
    for a in c.rules.allowances(f.signal, c.checklist):
        budget = BUDGETS[a.budget](c, f) if a.budget else None
        if a.budget and budget is None:
            continue  # nothing the allowance could explain here
        if budget is not None and f.amount > budget[0]:
            beyond = beyond or f"{f.refused}: more than {budget[1]} ({a.reason})"
            continue
        said = _evidence(c, f, a)
        if said is None and not a.ask:
            continue
        if said is not None and said[0] == "refutes":
            return Outcome("refused", f"{f.text}, but {said[1]}", allowance=a)
        within = f"within {budget[1]}" if budget is not None else ""
        if said is None or a.person:
            sentence, question = questions[a.id](c, f, within)
            return Outcome("asked", sentence, question, a)
        return Outcome("explained", _joined(f.text, within, said[1]), allowance=a)
    if c.rules.signal_of(f.signal).person:
        return Outcome("asked", f.text, f.question)
    return Outcome("refused", beyond or f.refused)


def _evidence(c: Case, f: Found, a: Allowance) -> Said:
    """The first evidence that speaks (in the allowance's order); no evidence needed: shown."""
    if not a.evidence:
        return "shows", ""
    for name in a.evidence:
        said = EVIDENCE[name](c, f)
        if said is not None:
            return said
    return None


def _joined(text: str, within: str, why: str) -> str:
    parts = [p for p in (within, why) if p]
    return f"{text}: {'; '.join(parts)}" if parts else text


@dataclass
class Judged:
    """What the allowances made of the signals one guard found, in order."""

    explained: list[str] = field(default_factory=list)
    asked: list[tuple[str, str]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    #: each signal, what it came to and the allowance that decided it (the decision's details)
    trail: list[dict[str, str]] = field(default_factory=list)

    def settle(
        self,
        c: Case,
        found: list[Found],
        questions: Mapping[str, Question],
        *,
        named: bool = False,
        per_file: bool = False,
    ) -> list[tuple[Found, str]]:
        """Judge each signal; the explained and asked are kept (``named``: an explanation starts with
        the allowance's name; ``per_file``: signals about single files are explained once per
        allowance, with their count), the refused returned with the sentence that refuses each."""
        out = []
        files: dict[str, tuple[Allowance, list[str]]] = {}
        for f in found:
            o = explain(c, f, questions)
            by = o.allowance.id if o.allowance else ""
            self.trail.append(
                {"signal": f.signal, "key": f.key or f.direction, "outcome": o.kind, "allowance": by}
            )
            if o.kind == "explained" and per_file and o.allowance is not None:
                files.setdefault(by, (o.allowance, []))[1].append(f.key)
            elif o.kind == "explained":
                named_as = o.allowance.name if named and o.allowance else ""
                self.explained.append(f"{named_as}: {o.sentence}" if named_as else o.sentence)
            elif o.kind == "asked":
                self.asked.append((o.sentence, o.question))
            else:
                self.refused.append(o.sentence)
                out.append((f, o.sentence))
        for a, keys in files.values():
            self.explained.append(f"{a.name}: {a.reason} ({len(keys)} data file(s), e.g. {keys[0]})")
        return out
