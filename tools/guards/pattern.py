"""The access-pattern guard: changing what the application does is not an optimization.

Measured from the traces, whatever the strategy id says. The pattern that must not change is the
application's *logical* pattern (:mod:`logical`): the data files and byte ranges it touches, the
sizes of the requests it makes, and the order class of each of its streams (a thread of a
process), judged on a grid of blocks that survives coalescing. How many threads or processes serve
the requests, and how they are aggregated or split into calls, are not the pattern.

The guard looks for the signals of resources/guards.toml it owns, in order (the work the program
reports, the files, the byte ranges, the order, the visiting order, the request sizes, the files
an I/O library laid out anew), and each is explained by an allowance of the strategy's category
or refuses the change (:mod:`evidence`). Larger requests over the same ranges are coalescing
(allowed to a buffering strategy) or a larger application record (a pattern change): settled by
the application's own evidence (its work counters, application events with sizes), the library's
own marks (read-modify-write windows, sieving windows, aggregators' domains), a shuffled request
sequence the larger requests follow block by block, or files read whole. Without any, a person is
asked one precise question; the change is never kept on its own.
"""

from __future__ import annotations

from typing import Any

from dftune.core.domain.verdicts import GuardDecision, not_run
from dftune.core.facts.paths import container_format
from dftune.tools.catalog import Strategy
from dftune.tools.guards.arms import Arm, sharing_inputs
from dftune.tools.guards.evidence import Case, Found, Judged, kib
from dftune.tools.guards.logical import compare, order_changed
from dftune.tools.guards.rules import GuardRules, guard_rules
from dftune.tools.trace.model import FileAccess

PERSON = "Settled only by a person (a win stays on trial until then)."


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
        baseline = None
    if not (incumbent.profiled and experiment.profiled):
        return not_run(
            "access_pattern",
            "the arms have no access profile (untraced?), so the byte ranges, "
            "order and transfer sizes were NOT compared",
        )
    rules = guard_rules()
    decision = compared(rules, strategy.checklist, incumbent, experiment)
    if decision.passed and baseline is not None and baseline.profiled:
        decision = _still_the_baselines_requests(baseline, incumbent, experiment, decision)
        if decision.passed:
            return _behind_the_kept_coalescing(
                rules, strategy.checklist, baseline, incumbent, experiment, decision
            )
    return decision


def compared(rules: GuardRules, checklist: int | None, inc: Arm, exp: Arm) -> GuardDecision:
    """The incumbent and the experiment compared, stage by stage: a refused signal ends it."""
    c = Case(rules, checklist, inc, inc, exp, rules.tolerance)
    c.relaid = _relaid(c) if c.allows("relayout") else []
    j, negligible = Judged(), list[str]()
    for stage in (_work_counters, _files, _ranges, _order, _visit_order, _sizes, _relayout):
        refused = stage(c, j, negligible)
        if refused is not None:
            return _decision(c, j, negligible, refused)
    return _decision(c, j, negligible, None)


# ------------------------------------------------------------------------------------ the stages
# Each finds its signals, has the allowances judge them, and returns why the pattern changed.


def _work_counters(c: Case, j: Judged, _: list[str]) -> str | None:
    inc, exp = c.inc.work, c.exp.work
    changed = [
        f"{k} {inc[k]:g} -> {exp[k]:g}"
        for k in sorted(set(inc) & set(exp))
        if abs(exp[k] - inc[k]) > c.tol * max(abs(inc[k]), 1e-12)
    ]
    found = [Found("work_counters_changed", f"the program reports different work: {'; '.join(changed)}")]
    return _first(j.settle(c, found if changed else [], QUESTIONS, named=True))


def _files(c: Case, j: Judged, _: list[str]) -> str | None:
    for d in ("read", "write"):
        have = {n for n, f in c.inc.files.items() if getattr(f, f"{d}_bytes") > 0}
        got = {n for n, f in c.exp.files.items() if getattr(f, f"{d}_bytes") > 0}
        gone = j.settle(
            c, [Found("files_gone", n, key=n, direction=d) for n in sorted(have - got)], QUESTIONS
        )
        if gone:
            n, first = len(gone), gone[0][0].key
            return (
                f"it no longer {d}s {n} of the {len(have)} data files the {c.inc.label} {d}s (e.g. {first})"
            )
        new = j.settle(
            c,
            [Found("files_new", n, key=n, direction=d) for n in sorted(got - have)],
            QUESTIONS,
            per_file=True,
        )
        if new:
            return f"it {d}s {len(new)} data files the {c.inc.label} never {d}s (e.g. {new[0][0].key})"
    return None


def _differing_bytes(f: FileAccess, g: FileAccess, direction: str) -> int:
    """How many bytes two arms' ranges of a file differ by: a whole-file access that only changed
    length differs by the length change; anything else by all of its bytes."""
    a, b = getattr(f, f"{direction}_unique_bytes"), getattr(g, f"{direction}_unique_bytes")
    whole = all(
        getattr(x, f"{direction}_segments") == 1 and getattr(x, f"{direction}_start") == 0 for x in (f, g)
    )
    return abs(a - b) if whole else max(a, b)


def _ranges(c: Case, j: Judged, negligible: list[str]) -> str | None:
    scale = max(c.inc.data_bytes, c.exp.data_bytes, 1)
    for d in ("read", "write"):
        found = [
            Found("ranges_changed", name, _differing_bytes(f, g, d), key=name, direction=d)
            for name, f in c.inc.files.items()
            if (g := c.exp.files.get(name)) is not None
            and getattr(f, f"{d}_bytes")
            and name not in c.relaid
            and getattr(f, f"{d}_ranges") != getattr(g, f"{d}_ranges")
        ]
        asked = len(j.asked)
        differ = [f for f, _ in j.settle(c, found, QUESTIONS, per_file=True)]
        if len(j.asked) > asked:  # fewer ranges inside the read windows: one question for them all
            sieved = [name for name, _ in j.asked[asked:]]
            del j.asked[asked:]
            j.asked.append(_sieved(c, sieved))
        if differ and sum(f.amount for f in differ) <= c.tol * scale:
            negligible += [f.key for f in differ]  # a small report file whose length follows the settings
            del j.refused[-len(differ) :]
            continue
        if differ:
            name = differ[0].key
            before, after = (_extent(arm.files[name], d) for arm in (c.inc, c.exp))
            total = sum(1 for x in c.inc.files.values() if getattr(x, f"{d}_bytes") > 0)
            return (
                f"it {d}s different byte ranges of {len(differ)} of {total} data files "
                f"(e.g. {name}: {before} -> {after})"
            )
    return None


def _extent(f: FileAccess, d: str) -> str:
    return f"{getattr(f, f'{d}_segments')} segment(s), {getattr(f, f'{d}_unique_bytes'):,} bytes"


def _sieved(c: Case, names: list[str]) -> tuple[str, str]:
    """Fewer bytes read, all inside the incumbent's sieving windows: a person decides."""
    rw = c.windows
    assert rw is not None
    a, b = c.inc.files[names[0]].read_unique_bytes, c.exp.files[names[0]].read_unique_bytes
    q = "Does the program still ask for the same data?"
    return (
        f"it reads fewer byte ranges of {len(names)} data file(s) (e.g. {names[0]}: {a:,} -> {b:,} "
        f"bytes), all inside the {c.inc.label}'s {rw.windows:,} data-sieving read windows; the trace "
        "cannot tell the holes the windows read between the pieces (bytes nobody asked for) from "
        f"pieces the program no longer reads. {q}",
        q,
    )


def _order(c: Case, j: Judged, _: list[str]) -> str | None:
    found = []
    for d, x in c.logical.items():  # each stream's order class on the blocks both arms' requests share
        for level, (b, a) in x.orders.items():
            if order_changed(b, a):
                text = (
                    f"the {d} requests are visited in another order {level}: {100 * (b.share or 0):.0f}% "
                    f"-> {100 * (a.share or 0):.0f}% of each stream's steps {level} go backwards in (file, "
                    f"offset) order ({b.label} -> {a.label}; {b.streams} -> {a.streams} stream(s), "
                    f"{x.grid.blocks:,} blocks that both arms' requests share)"
                )
                found.append(Found("order_changed", text, (a.share or 0) - (b.share or 0), direction=d))
    before, after = c.kept(c.inc).random_share, c.kept(c.exp).random_share
    if (
        not c.logical
        and before is not None
        and after is not None
        and abs(after - before) > c.rules.order_tolerance
    ):
        text = (
            f"the order within files changed: {100 * before:.0f}% -> {100 * after:.0f}% of the positioned "
            "accesses go backwards (random)"
        )
        found.append(Found("order_changed", text, after - before))
    return _first(j.settle(c, found, QUESTIONS, named=True))


def _visit_order(c: Case, j: Judged, _: list[str]) -> str | None:
    if c.logical:
        return None  # the order across files is part of each stream's order
    n = c.rules.min_files_for_order
    before, after = c.inc.visit_order(n), c.exp.visit_order(n)
    if before is None or after is None or abs(after - before) <= c.rules.visit_order_tolerance:
        return None
    text = (
        f"the files are visited in another order: the correlation of the visiting order with the "
        f"name order went {before:+.2f} -> {after:+.2f} (a shuffle added or removed?)"
    )
    return _first(j.settle(c, [Found("visit_order_changed", text)], QUESTIONS, named=True))


def _sizes(c: Case, j: Judged, _: list[str]) -> str | None:
    lo, hi = c.rules.size_ratio_low, c.rules.size_ratio_high
    larger: list[str] = []
    for d in ("read", "write"):
        before, after = c.mean_request(d)
        if before is None or after is None or before == 0 or lo <= after / before <= hi:
            continue
        moved = f"{d} calls {kib(before)} -> {kib(after)} on average"
        why = c.rules.why(c.checklist).split(":", 1)[0]
        if after / before < lo:
            refusal = (
                f"the calls got smaller ({moved}): splitting requests changes what the application asks for"
            )
            f = Found("smaller_requests", moved, direction=d, refusal=refusal)
        elif c.allows("coalescing") and not (d == "read" and _all_library_reads(c)):
            larger.append(d)  # one question (or one piece of evidence) for every direction
            continue
        else:
            refusal = (
                f"the calls got larger ({moved}) but this kind of change ({why}) does not merge "
                "requests: a transfer-size change"
            )
            f = Found("larger_requests", moved, direction=d, refusal=refusal)
        if refused := _first(j.settle(c, [f], QUESTIONS, named=True)):
            return refused
    if not larger:
        return None
    moves = "; ".join(f"{d} {kib(c.mean_request(d)[0])} -> {kib(c.mean_request(d)[1])}" for d in larger)
    found = Found(
        "larger_requests",
        f"larger calls ({moves} on average) over the same byte ranges",
        direction="+".join(larger),
    )
    return _first(j.settle(c, [found], QUESTIONS, named=True))


def _all_library_reads(c: Case) -> bool:
    """Every read of both arms is of a file the application writes (the library's, to modify)."""
    reading = [n for arm in (c.inc, c.exp) for n, x in arm.files.items() if x.read_bytes]
    return bool(reading) and all(c.library_read(n) for n in reading)


def _relaid(c: Case) -> list[str]:
    """Files written in both arms, at other ranges but with at least the incumbent's bytes (fewer
    bytes is never a new layout), that are an I/O library's containers (by suffix or signature: a
    plain file's offsets are the application's, whatever the strategy says)."""
    out = []
    for name, f in c.inc.files.items():
        g = c.exp.files.get(name)
        if g is None or not f.write_bytes or not g.write_bytes or f.write_ranges == g.write_ranges:
            continue
        if g.write_unique_bytes < f.write_unique_bytes * (1 - c.tol):
            continue
        if container_format(f.path) or container_format(g.path):
            out.append(name)
    return out


def _relayout(c: Case, j: Judged, _: list[str]) -> str | None:
    if not c.relaid:
        return None
    first = c.relaid[0]
    seen = "; ".join((c.relaid_order() + c.relaid_sizes())[:3])
    laid = (
        f"the I/O library laid out {len(c.relaid)} file(s) anew (e.g. {first}: "
        f"{c.inc.files[first].write_segments} -> {c.exp.files[first].write_segments} written segment(s), "
        "at least the same bytes)"
    )
    return _first(
        j.settle(c, [Found("relaid_requests", f"{laid}; {seen}" if seen else laid)], QUESTIONS, named=True)
    )


def _first(refused: list[tuple[Found, str]]) -> str | None:
    return refused[0][1] if refused else None


# ------------------------------------------------------------------------------------ questions


def _coalescing_question(c: Case, f: Found, within: str) -> tuple[str, str]:
    """The one question that settles larger requests the trace cannot tell apart."""
    directions = f.direction.split("+")
    moves = " and ".join(
        f"{d}s {kib(c.mean_request(d)[0])} -> {kib(c.mean_request(d)[1])}" for d in directions
    )
    before, after = c.mean_request(directions[0])
    question = (
        f"The {moves} per call over the same byte ranges. Does the program still {directions[0]} records of "
        f"{kib(before)} and only group them into larger calls (buffering or chunking: keep it), or does "
        f"each of its records now hold {kib(after)} (a different application request: refuse it)?"
    )
    follow = next((x.follow for d in directions if (x := c.logical.get(d)) and x.follow), None)
    if follow is None:
        seen = "the trace has no request log to compare the order of the requests"
    elif not follow.distinctive:
        seen = "the requests come in file order, which requests of any size follow"
    elif follow.departs:
        seen = (
            "the larger requests come in an order of their own (rank correlation "
            f"{follow.with_finer:+.2f} with the smaller requests' shuffled order: a new sequence, or one "
            "that is not seeded)"
        )
    else:
        seen = (
            "the larger requests only partly follow the smaller requests' shuffled order (rank correlation "
            f"{follow.with_finer:+.2f})"
        )
    return (
        f"{f.text}; the trace cannot tell coalescing (allowed) from a larger application record (an "
        f"access-pattern change): {seen}, and there is no application-level evidence (work counters in "
        f"the workload spec, or application events with sizes). {PERSON} {question}",
        question,
    )


def _relayout_question(c: Case, f: Found, within: str) -> tuple[str, str]:
    seen = "; ".join((c.relaid_order() + c.relaid_sizes())[:3])
    question = (
        f"The trace shows the file system calls only: {seen}. Does the change only alter how the I/O "
        "library stores and fetches the same data (chunks, alignment, pages, its cache: keep it), or does "
        "the program now ask for other data, in other sizes or in another order (refuse it)?"
    )
    evidence = (
        "the work counters cannot show an order"
        if c.relaid_order()
        else "there is no application-level evidence (work counters in the workload spec, or "
        "application events with sizes)"
    )
    return (
        f"{f.text}; the trace cannot tell the library's new layout from a change in the application's "
        f"requests; {evidence}. {PERSON} {question}",
        question,
    )


QUESTIONS = {
    "coalescing": _coalescing_question,
    "relayout": _relayout_question,
    "sieved_ranges": lambda c, f, within: (f.key, ""),  # one question for them all (_ranges)
}


# ------------------------------------------------------------------------------------ the decision


def _details(c: Case, j: Judged, negligible: list[str]) -> dict[str, Any]:
    def summary(arm: Arm) -> dict[str, Any]:
        return {
            "files": len(arm.files),
            "random_share": arm.totals.random_share,
            "mean_read_bytes": arm.mean_call_bytes("read"),
            "mean_write_bytes": arm.mean_call_bytes("write"),
        }

    return {
        "incumbent": summary(c.inc),
        "experiment": summary(c.exp),
        "category": c.rules.why(c.checklist),
        "relaid_out": c.relaid[:20],
        "negligible_range_changes": negligible[:20],
        "logical": {d: x.details() for d, x in c.logical.items()},
        "signals": j.trail,
    }


def _decision(c: Case, j: Judged, negligible: list[str], refused: str | None) -> GuardDecision:
    details = _details(c, j, negligible)
    if refused is not None:
        return GuardDecision(
            guard="access_pattern",
            passed=False,
            verdict="rejected",
            details=details,
            reason=f"changes what the application does, whatever its strategy id says: {refused}",
        )
    if j.asked:
        return GuardDecision(
            guard="access_pattern",
            passed=False,
            verdict="inconclusive",
            details={**details, "question": j.asked[0][1]},
            reason="inconclusive: " + "; ".join(s for s, _ in j.asked),
        )
    same = f"the same data files, byte ranges, order and transfer sizes as the {c.inc.label}"
    return GuardDecision(
        guard="access_pattern", passed=True, details=details, reason="; ".join(j.explained) or same
    )


# ------------------------------------------------------------------------------------ behind a kept change


def _asked(decision: GuardDecision, reason: str, question: str, **details: Any) -> GuardDecision:
    """Behind a kept change, the baseline's requests are lost from sight: a person decides."""
    trail = [*decision.details.get("signals", []), {"signal": "baseline_requests_lost", "outcome": "asked"}]
    return GuardDecision(
        guard="access_pattern",
        passed=False,
        verdict="inconclusive",
        details={**decision.details, "question": question, "signals": trail, **details},
        reason=f"inconclusive: {reason}",
    )


def _behind_the_kept_coalescing(
    rules: GuardRules, checklist: int | None, base: Arm, inc: Arm, exp: Arm, decision: GuardDecision
) -> GuardDecision:
    """A kept change that merged requests into larger calls (buffering) shows its flushes, not the
    application's requests: an experiment with the incumbent's calls may still have changed the
    records behind them (4 KiB rows packed into 16 KiB records look the same through a 64 KiB
    buffer). Against the baseline, the experiment's larger calls must be settled by the same
    evidence the kept change's needed; when they cannot be, neither can this change, and a person
    is asked."""
    if not _calls_grew(rules, base, inc):
        return decision  # nothing kept merges calls: the incumbent's trace shows the requests
    merging = next((cat for cat in rules.category if rules.allows("coalescing", cat)), checklist)
    against = compared(rules, checklist if rules.allows("coalescing", checklist) else merging, base, exp)
    if against.verdict != "inconclusive":
        return decision
    said = against.reason.removeprefix("inconclusive: ")
    return _asked(
        decision,
        f"the same calls as the {inc.label}, whose kept change serves the application's requests with larger "
        f"calls; behind them the trace cannot tell whether this change kept the baseline's requests. "
        f"Against the baseline: {said}",
        str(against.details.get("question", "")),
        against_baseline=against.details,
    )


def _calls_grew(rules: GuardRules, base: Arm, inc: Arm) -> bool:
    """The incumbent's calls are larger than the baseline's in a direction (a kept change merges)."""
    for direction in ("read", "write"):
        before, after = base.mean_call_bytes(direction), inc.mean_call_bytes(direction)
        if before and after and after / before > rules.size_ratio_high:
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
        small, large = kib(now.before.mean_size), kib(now.after.mean_size)
        question = (
            f"The baseline {direction}s requests of {small}; the {inc.label} serves them with {direction}s "
            f"of {kib(kept.after.mean_size)} in the same order, the experiment with {direction}s of "
            f"{large} in another order. Does the program still {direction} records of {small} (keep "
            f"it), or does each of its records now hold {large} (a different application request: "
            "refuse it)?"
        )
        return _asked(
            decision,
            f"the {inc.label}'s {direction}s follow the baseline's shuffled {small} requests block by block "
            f"(rank correlation {kept.follow.with_finer:+.2f}), the experiment's do not "
            f"({now.follow.with_finer:+.2f}): its {large} requests may be larger application records. "
            f"{PERSON} {question}",
            question,
            baseline_follows={"incumbent": kept.details()["follows"], "experiment": now.details()["follows"]},
        )
    return decision
