"""The no-doing-less guard: a speed-up from fewer bytes, events, epochs or checkpoints is rejected.

Two comparisons, both measured:

- the application's *logical* work against the baseline: the bytes of its data files it reads
  and writes at least once, the files it touches, epochs, steps, checkpoints and the work
  counters it prints, and the bytes it reads and writes outside its data folder. Nothing may
  shrink, whatever the strategy says it is;
- its *physical* work against the incumbent (the best configuration so far, traced with
  it): calls and bytes moved may only change as the strategy's checklist category allows
  (``resources/guards.toml``): coalescing may issue fewer calls, a cache may drop the bytes
  the incumbent reads more than once and nothing else. Under a library that reads to modify
  (data sieving), the bytes and the locks of the incumbent's read-modify-write windows
  (:mod:`library`) may go when the experiment no longer makes them: the holes they wrote back
  were never the application's. Likewise the holes the incumbent's read windows read between
  each process's pieces (data sieving for reads), while every process reads its own bytes as many
  times over.

A cache's dropped re-reads of the inputs (files the program only reads) look in a trace exactly
like a program that stopped making the passes that re-read them (fewer epochs): they are
accepted when the program's own account shows the passes are kept (work counters, epochs or
steps, its most frequent application event), and are ``inconclusive`` otherwise, a question for
a person.

When the bytes read at least once fall below the baseline's, and the baseline's reads were
sieving windows holding every byte the experiment reads, the trace cannot tell the holes (bytes
nobody asked for) from pieces the program stopped reading: the decision is ``inconclusive``
and a person is asked.

Every reason carries the numbers.
"""

from __future__ import annotations

import functools

from dftune.core.domain.verdicts import GuardDecision
from dftune.tools.catalog import Strategy
from dftune.tools.guards.arms import Arm
from dftune.tools.guards.library import ReadWindows, Windows, read_windows, repeats, rmw_windows
from dftune.tools.guards.rules import guard_rules
from dftune.tools.trace.model import Analysis

#: fewest calls a physical count must drop by to count as doing less: a trace can lose an event at
#: a process's exit, and a library may open a file once more or less; 9 -> 8 metadata calls of a
#: ROMIO program under load was refused as doing less
CALL_SLACK = 2
#: the bytes read at least once of the inputs outside the data folder (:attr:`Arm.outside_inputs`),
#: and written at least once of the files written there (:attr:`Arm.outside_outputs`)
OUTSIDE_IN, OUTSIDE_OUT = "outside_input_bytes_read_once", "outside_output_bytes_written_once"
#: how much less of those a change may move before it counts: a small configuration file read by
#: one code path and not the other, or a log line fewer, is not the application's data
OUTSIDE_SLACK_BYTES = 64 * 1024


def work_done(a: Analysis) -> dict[str, float]:
    """What the application did, from the summary (every trace has it, profiled or not)."""
    return {
        "read_bytes": float(a.read.bytes or 0),
        "write_bytes": float(a.write.bytes or 0),
        "read_count": float(a.read.count),
        "write_count": float(a.write.count),
        "metadata_count": float(a.metadata.count),
        "files_accessed": float(a.files_accessed),
        "epochs": float(len(a.epochs)),
        "steps": float(a.steps),
        "checkpoints": float(a.checkpoint_events),
    }


def _profiled(*arms: Arm) -> bool:
    """Compare per data file only when every arm has its access profile (else the summaries)."""
    return all(a.profiled and a.files for a in arms)


def logical_work(arm: Arm, profiled: bool = True) -> dict[str, float]:
    """What must never shrink: with the access profile, the data files' unique bytes and counts;
    without it, the summary's bytes and files (an upper bound of the same quantities)."""
    a = arm.analysis
    out = {"epochs": float(len(a.epochs)), "steps": float(a.steps), "checkpoints": float(a.checkpoint_events)}
    if profiled and arm.profiled and arm.files:
        t = arm.totals
        out.update(
            input_bytes_read_once=float(t.input_unique_bytes),
            data_bytes_written_once=float(t.write_unique_bytes),
            input_files_read=float(t.input_files),
            data_files_written=float(t.files_written),
        )
        if arm.outside_inputs:
            out[OUTSIDE_IN] = float(sum(f.read_unique_bytes for f in arm.outside_inputs.values()))
        if arm.outside_outputs:
            out[OUTSIDE_OUT] = float(sum(f.write_unique_bytes for f in arm.outside_outputs.values()))
    else:
        out.update(
            read_bytes=float(a.read.bytes or 0),
            write_bytes=float(a.write.bytes or 0),
            files_accessed=float(a.files_accessed),
        )
    out.update({f"work counter {k}": float(v) for k, v in arm.work.items()})
    return out


def physical_work(arm: Arm, profiled: bool = True) -> dict[str, float]:
    """Calls and bytes moved (data files when profiled, else the whole trace)."""
    if profiled and arm.profiled and arm.files:
        t = arm.totals
        return {
            "read_bytes": float(t.read_bytes),
            "write_bytes": float(t.write_bytes),
            "read_calls": float(t.read_calls),
            "write_calls": float(t.write_calls),
            "metadata_calls": float(t.metadata_calls),
        }
    a = arm.analysis
    return {
        "read_bytes": float(a.read.bytes or 0),
        "write_bytes": float(a.write.bytes or 0),
        "read_calls": float(a.read.count),
        "write_calls": float(a.write.count),
        "metadata_calls": float(a.metadata.count),
    }


def doing_less_by_definition(strategy: Strategy) -> GuardDecision | None:
    """A strategy the catalog marks as doing less is rejected before anything is measured."""
    if strategy.forbidden_kind != "doing_less":
        return None
    return GuardDecision(
        guard="no_doing_less",
        passed=False,
        verdict="rejected",
        reason=f"{strategy.id} is doing less by definition: {strategy.forbidden_reason}",
    )


def _as_arm(x: Arm | Analysis, label: str) -> Arm:
    return x if isinstance(x, Arm) else Arm(analysis=x, label=label)


def _drop(key: str, before: float, after: float) -> str:
    return f"{key.replace('_', ' ')} {before:,.0f} -> {after:,.0f} ({100 * (after - before) / before:+.1f}%)"


#: how far the experiment's passes over its own bytes may fall below the incumbent's before the
#: bytes the windows leave behind are a pass less, not their holes (window edges overlap a little)
PASS_SLACK = 0.1


def _sieving_dropped(inc: Arm, exp: Arm) -> Windows | None:
    """The incumbent's read-modify-write windows, when the experiment makes under half as many and
    each of its processes still writes its bytes as many times over (:func:`library.repeats`)."""
    had = rmw_windows(inc)
    if not had.calls or rmw_windows(exp).calls >= 0.5 * had.calls:
        return None
    return had if _passes_kept(inc, exp, "write") is not None else None


def _passes_kept(before: Arm, after: Arm, direction: str) -> float | None:
    """``before``'s passes over its own bytes (:func:`library.repeats`) when each process of
    ``after`` still moves its bytes as many times over (within the slack), else None."""
    b, a = repeats(before, direction), repeats(after, direction)
    return b if b is not None and a is not None and a >= b * (1 - PASS_SLACK) else None


def passes_shown(inc: Arm, exp: Arm, tol: float) -> str | None:
    """What shows that ``exp`` still makes the ``inc``'s passes over its data (a cache serves the
    re-reads; a program doing fewer epochs drops them too, and its trace looks the same), or None:
    the work counters the program prints, epochs or steps in the trace, or its most frequent
    application event (per sample or per step, as a rule), each kept within the tolerance."""
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


def _inputs_read_less(inc: Arm, exp: Arm, tol: float) -> bool:
    """Whether ``exp`` reads the files ``inc`` only reads (its inputs, which ``inc`` reads more than
    once) less: the re-reads a lost pass over the data drops. Reads of a file the program writes
    are its read-backs, or its I/O library's, not passes over a dataset."""
    i, a = inc.totals.input_read_bytes, exp.totals.input_read_bytes
    return inc.totals.input_reread_bytes > 0 and a < i * (1 - tol)


def _behind_a_kept_cache(base: Arm, inc: Arm, exp: Arm, tol: float) -> str | None:
    """A kept change that dropped the baseline's re-reads of its inputs (a cache) hides the passes
    that made them: an experiment with the incumbent's reads may still make fewer passes behind it
    (one epoch of two, with every sample already cached, reads what the cache read). Against the
    baseline, the passes must be shown as the kept change's had to be (:func:`passes_shown`);
    when they cannot be, neither can this change's, and a person is asked. Data sieving's holes,
    which several processes' windows read, are not a cache's re-reads."""
    b, rereads = base.totals.input_read_bytes, base.totals.input_reread_bytes
    i, a = inc.totals.input_read_bytes, exp.totals.input_read_bytes

    def served(after: int) -> bool:  # fewer reads, all of them within the baseline's re-reads
        return b > 0 and after < b * (1 - tol) and b - after <= rereads * (1 + tol) + tol * b

    if not (served(i) and served(a)) or passes_shown(base, exp, tol) is not None:
        return None
    if _read_sieving_dropped(base, inc) is not None:
        return None  # the kept change turned the library's read windows off
    return (
        f"{_drop('input read_bytes', b, a)} vs the {base.label}, within the {rereads:,} bytes it "
        f"reads more than once: the {inc.label}'s kept change no longer re-reads them, and behind "
        "it the trace cannot tell whether this change still makes the baseline's passes over the "
        "data (fewer epochs or samples read what a cache read). Does the program still make as "
        f"many passes over its data as the {base.label}?"
    )


def _read_sieving_dropped(coarse: Arm, fine: Arm) -> tuple[ReadWindows, float] | None:
    """The ``coarse`` arm's read windows over the ``fine`` arm's pieces, with the passes kept, and
    how many passes the windows made over their holes."""
    rw = read_windows(coarse, fine)
    passes = _passes_kept(coarse, fine, "read") if rw is not None else None
    return (rw, passes) if rw is not None and passes is not None else None


def no_doing_less_guard(
    baseline: Arm | Analysis,
    experiment: Arm | Analysis,
    *,
    incumbent: Arm | Analysis | None = None,
    strategy: Strategy | None = None,
    tolerance: float | None = None,
) -> GuardDecision:
    """Reject a change whose trace shows less work, with the numbers (see the module docstring)."""
    rules = guard_rules()
    tol = rules.tolerance if tolerance is None else tolerance
    if strategy is not None and (by_definition := doing_less_by_definition(strategy)) is not None:
        return by_definition
    base, exp = _as_arm(baseline, "baseline"), _as_arm(experiment, "experiment")
    inc = _as_arm(incumbent, "incumbent") if incumbent is not None else base
    allowed = rules.allowed(strategy.checklist if strategy else None)
    drops: list[str] = []
    by_file = _profiled(base, inc, exp)
    logical_b, logical_e = logical_work(base, by_file), logical_work(exp, by_file)
    unsure: list[str] = []
    for key, b in logical_b.items():
        a = logical_e.get(key, 0.0)
        if not (b > 0 and a < b * (1 - tol)) or (
            key in (OUTSIDE_IN, OUTSIDE_OUT) and b - a <= OUTSIDE_SLACK_BYTES
        ):
            continue
        line = _drop(key, b, a) + " vs the baseline"
        sieved_base = _read_sieving_dropped(base, exp) if key == "input_bytes_read_once" else None
        held = sieved_base[0] if sieved_base else None
        if held is not None and b - a <= held.file_holes * (1 + tol):
            unsure.append(
                f"{line}: the baseline's {held.windows:,} reads were data-sieving windows holding "
                f"every byte of the experiment's {held.pieces:,} reads; the trace cannot tell the "
                "holes between the pieces (bytes nobody asked for) from pieces the program no "
                "longer reads. Does the program still ask for the same data?"
            )
        else:
            drops.append(line)
    phys_i, phys_e = physical_work(inc, by_file), physical_work(exp, by_file)
    expected: list[str] = []
    rereads = float(inc.totals.reread_bytes) if by_file else 0.0
    # the incumbent's read-modify-write windows, read from the request log only when a drop asks
    sieving = functools.cache(lambda: _sieving_dropped(inc, exp) if allowed.rmw_reads and by_file else None)
    read_sieving = functools.cache(
        lambda: _read_sieving_dropped(inc, exp) if allowed.rmw_reads and by_file else None
    )
    for key, b in phys_i.items():
        a = phys_e[key]
        if not (b > 0 and a < b * (1 - tol)):
            continue
        if key.endswith("_calls") and b - a <= CALL_SLACK:
            continue  # a call or two (an event lost at exit, one open fewer) is noise, not work
        line = _drop(key, b, a) + f" vs the {inc.label}"
        family = key.split("_", 1)[0]
        if family == "read" and allowed.rmw_reads and by_file and inc.totals.files_written:
            expected.append(f"{line}: the I/O library's read-modify-write reads of the files it writes")
        elif key.endswith("_calls") and family in allowed.fewer_calls:
            expected.append(line)
        elif key == "write_bytes" and (sieved := sieving()) is not None and b - a <= sieved.bytes * (1 + tol):
            expected.append(
                f"{line}: within the {sieved.bytes:,} bytes of the {inc.label}'s {sieved.calls:,} "
                "read-modify-write windows (data sieving writes back the holes around the pieces)"
            )
        elif (
            key == "metadata_calls"
            and (sieved := sieving()) is not None
            and b - a <= 2 * sieved.calls + CALL_SLACK
        ):
            expected.append(f"{line}: the locks around the {inc.label}'s {sieved.calls:,} windows")
        elif (
            key == "read_bytes"
            and (sieved_inc := read_sieving()) is not None
            and b - a <= sieved_inc[0].holes * sieved_inc[1] * (1 + tol)
        ):
            held, passes = sieved_inc
            expected.append(
                f"{line}: within the {held.holes:,} bytes the {inc.label}'s {held.windows:,} sieving "
                f"windows read between each process's own pieces, {passes:.2g} time(s) over (data "
                "sieving reads the holes)"
            )
        elif key == "read_bytes" and allowed.serve_rereads and b - a <= rereads * (1 + tol) + tol * b:
            within = f"{line}: within the {rereads:,.0f} bytes the {inc.label} reads more than once"
            shown = passes_shown(inc, exp, tol)
            if shown is not None or not _inputs_read_less(inc, exp, tol):
                expected.append(f"{within}; {shown}" if shown else within)  # else: read-backs of its outputs
            else:
                unsure.append(
                    f"{within}; the trace cannot tell a cache serving them from memory (allowed) from "
                    "a program that no longer makes the passes that re-read them (fewer epochs or "
                    "samples: doing less), and nothing the program reports counts its passes (work "
                    "counters in the workload spec, epochs or steps, application events). Does the "
                    f"program still make as many passes over its data as the {inc.label}?"
                )
        elif key == "read_bytes" and allowed.serve_rereads:
            drops.append(
                f"{line}: more than the {rereads:,.0f} bytes the {inc.label} reads more than once "
                "(a cache may skip re-reads, not data)"
            )
        else:
            drops.append(line)
    if by_file and inc is not base and not drops and (behind := _behind_a_kept_cache(base, inc, exp, tol)):
        unsure.append(behind)
    details = {
        "baseline": logical_b,
        "experiment_logical": logical_e,
        "incumbent_physical": phys_i,
        "experiment_physical": phys_e,
        "tolerance": tol,
        "incumbent_rereads": rereads,
        "allowed": allowed.model_dump(),
        "measured_from": "access profile" if by_file else "summary",
    }
    details["inconclusive"] = unsure
    if drops or unsure:  # a measured drop refuses; one only a person can settle is asked
        return GuardDecision(
            guard="no_doing_less",
            passed=False,
            verdict="rejected" if drops else "inconclusive",
            details=details,
            reason="doing less, not going faster: " + "; ".join(drops)
            if drops
            else "inconclusive: " + "; ".join(unsure),
        )
    note = f" (as {allowed.why.split(':', 1)[0]} allows: {'; '.join(expected)})" if expected else ""
    return GuardDecision(
        guard="no_doing_less",
        passed=True,
        details=details,
        reason=f"the same work was done (within {tol:.0%}){note}",
    )
