"""The no-doing-less guard: a speed-up from fewer bytes, events, epochs or checkpoints is rejected.

It looks for the signals of resources/guards.toml it owns, measured:

- ``less_logical_work``, against the baseline: the bytes of its data files the application reads
  and writes at least once, the files it touches, epochs, steps, checkpoints, the work counters
  it prints, and the bytes it reads and writes outside its data folder. Nothing may shrink;
- ``fewer_*_calls`` and ``fewer_*_bytes``, against the incumbent (the best configuration so
  far, traced with it): the calls and bytes it moves;
- ``passes_behind_a_cache``: behind a kept cache, fewer passes over the data read what the cache
  read, so only the program's own account of its passes can tell.

Each is then explained by an allowance of the strategy's category, or not (:mod:`evidence`):
coalescing may issue fewer calls, a cache may drop what the incumbent reads more than once, data
sieving's holes and locks may go. A cache's dropped re-reads of the inputs look exactly like a
program that stopped making the passes that re-read them: without the program's account of its
passes (work counters, epochs or steps, its most frequent application event) a person is asked.
Every reason carries the numbers.
"""

from __future__ import annotations

from typing import Any

from dftune.core.domain.verdicts import GuardDecision
from dftune.tools.catalog import Strategy
from dftune.tools.guards.arms import Arm
from dftune.tools.guards.evidence import Case, Found, Judged
from dftune.tools.guards.rules import guard_rules
from dftune.tools.trace.model import Analysis

#: the work counted outside the data folder (a name made afresh in every run cancels out)
OUTSIDE = ("outside_input_bytes_read_once", "outside_output_bytes_written_once")


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


def logical_work(arm: Arm, by_file: bool = True) -> dict[str, float]:
    """What must never shrink: with the access profile, the data files' unique bytes and counts;
    without it, the summary's bytes and files (an upper bound of the same quantities)."""
    a = arm.analysis
    out = {"epochs": float(len(a.epochs)), "steps": float(a.steps), "checkpoints": float(a.checkpoint_events)}
    if by_file:
        t = arm.totals
        out["input_bytes_read_once"] = float(t.input_unique_bytes)
        out["data_bytes_written_once"] = float(t.write_unique_bytes)
        out["input_files_read"] = float(t.input_files)
        out["data_files_written"] = float(t.files_written)
        if arm.outside_inputs:
            out[OUTSIDE[0]] = float(sum(f.read_unique_bytes for f in arm.outside_inputs.values()))
        if arm.outside_outputs:
            out[OUTSIDE[1]] = float(sum(f.write_unique_bytes for f in arm.outside_outputs.values()))
    else:
        out.update(read_bytes=float(a.read.bytes or 0), write_bytes=float(a.write.bytes or 0))
        out["files_accessed"] = float(a.files_accessed)
    out.update({f"work counter {k}": float(v) for k, v in arm.work.items()})
    return out


def physical_work(arm: Arm, by_file: bool = True) -> dict[str, float]:
    """Calls and bytes moved (data files when profiled, else the whole trace)."""
    if by_file:
        t = arm.totals
        calls = {"read": t.read_calls, "write": t.write_calls, "metadata": t.metadata_calls}
        moved = {"read": t.read_bytes, "write": t.write_bytes}
    else:
        a = arm.analysis
        calls = {"read": a.read.count, "write": a.write.count, "metadata": a.metadata.count}
        moved = {"read": a.read.bytes or 0, "write": a.write.bytes or 0}
    return {
        **{f"{k}_bytes": float(v) for k, v in moved.items()},
        **{f"{k}_calls": float(v) for k, v in calls.items()},
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


def _found(
    c: Case,
    logical: tuple[dict[str, float], dict[str, float]],
    physical: tuple[dict[str, float], dict[str, float]],
) -> list[Found]:
    """The signals: logical work shrunk against the baseline, calls and bytes against the incumbent."""
    r = c.rules
    found = []
    for key, b in logical[0].items():
        a = logical[1].get(key, 0.0)
        if b > 0 and a < b * (1 - c.tol) and not (key in OUTSIDE and b - a <= r.outside_slack_bytes):
            found.append(Found("less_logical_work", _drop(key, b, a) + " vs the baseline", b - a, b, key))
    for key, b in physical[0].items():
        a = physical[1][key]
        if not (b > 0 and a < b * (1 - c.tol)) or (key.endswith("_calls") and b - a <= r.call_slack):
            continue  # a call or two (an event lost at exit, one open fewer) is noise, not work
        family, what = key.split("_")
        text = _drop(key, b, a) + f" vs the {c.inc.label}"
        found.append(Found(f"fewer_{family}_{what}", text, b - a, b, key, family))
    if c.by_file and c.inc is not c.base and not found and (behind := _behind_a_kept_cache(c)):
        found.append(behind)
    return found


def _behind_a_kept_cache(c: Case) -> Found | None:
    """A kept change that dropped the baseline's re-reads of its inputs (a cache) hides the passes
    that made them: an experiment with the incumbent's reads may still make fewer passes behind it
    (one epoch of two, with every sample already cached, reads what the cache read). Against the
    baseline, the passes must be shown as the kept change's had to be; when they cannot be,
    neither can this change's, and a person is asked. Data sieving's holes, which several
    processes' windows read, are not a cache's re-reads."""
    base, inc, exp, tol = c.base, c.inc, c.exp, c.tol
    b, rereads = base.totals.input_read_bytes, base.totals.input_reread_bytes
    i, a = inc.totals.input_read_bytes, exp.totals.input_read_bytes

    def served(after: int) -> bool:  # fewer reads, all of them within the baseline's re-reads
        return b > 0 and after < b * (1 - tol) and b - after <= rereads * (1 + tol) + tol * b

    if not (served(i) and served(a)) or c.passes_shown(base, exp) is not None:
        return None
    if c.read_sieving(base, inc) is not None:
        return None  # the kept change turned the library's read windows off
    question = f"Does the program still make as many passes over its data as the {base.label}?"
    text = (
        f"{_drop('input read_bytes', b, a)} vs the {base.label}, within the {rereads:,} bytes it "
        f"reads more than once: the {inc.label}'s kept change no longer re-reads them, and behind "
        "it the trace cannot tell whether this change still makes the baseline's passes over the "
        f"data (fewer epochs or samples read what a cache read). {question}"
    )
    return Found("passes_behind_a_cache", text, question=question)


def _question(c: Case, f: Found, within: str) -> tuple[str, str]:
    """The question a cache's dropped re-reads (or the baseline's sieving windows) leave."""
    if f.signal == "less_logical_work":
        q = "Does the program still ask for the same data?"
        return (
            f"{f.text}: {within.removeprefix('within ')}; the trace cannot tell the holes between the "
            f"pieces (bytes nobody asked for) from pieces the program no longer reads. {q}",
            q,
        )
    q = f"Does the program still make as many passes over its data as the {c.inc.label}?"
    return (
        f"{f.text}: {within}; the trace cannot tell a cache serving them from memory (allowed) from "
        "a program that no longer makes the passes that re-read them (fewer epochs or samples: "
        "doing less), and nothing the program reports counts its passes (work counters in the "
        "workload spec, epochs or steps, application events). " + q,
        q,
    )


QUESTIONS = {"cache_rereads": _question, "sieved_input": _question}


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
    if strategy is not None and (by_definition := doing_less_by_definition(strategy)) is not None:
        return by_definition
    base, exp = _as_arm(baseline, "baseline"), _as_arm(experiment, "experiment")
    inc = _as_arm(incumbent, "incumbent") if incumbent is not None else base
    tol = rules.tolerance if tolerance is None else tolerance
    c = Case(rules, strategy.checklist if strategy else None, base, inc, exp, tol)
    logical = logical_work(base, c.by_file), logical_work(exp, c.by_file)
    physical = physical_work(inc, c.by_file), physical_work(exp, c.by_file)
    j = Judged()
    j.settle(c, _found(c, logical, physical), QUESTIONS)
    details: dict[str, Any] = {
        "baseline": logical[0],
        "experiment_logical": logical[1],
        "incumbent_physical": physical[0],
        "experiment_physical": physical[1],
        "tolerance": tol,
        "incumbent_rereads": float(inc.totals.reread_bytes) if c.by_file else 0.0,
        "category": rules.why(c.checklist),
        "measured_from": "access profile" if c.by_file else "summary",
        "inconclusive": [s for s, _ in j.asked],
        "signals": j.trail,
    }
    return _decision(j, details, tol, rules.why(c.checklist))


def _decision(j: Judged, details: dict[str, Any], tol: float, why: str) -> GuardDecision:
    """A measured drop refuses; one only a person can settle is asked; else the same work."""
    if j.refused:
        reason = "doing less, not going faster: " + "; ".join(j.refused)
        return GuardDecision(
            guard="no_doing_less", passed=False, verdict="rejected", details=details, reason=reason
        )
    if j.asked:
        details = {**details, "question": j.asked[0][1]}
        reason = "inconclusive: " + "; ".join(s for s, _ in j.asked)
        return GuardDecision(
            guard="no_doing_less", passed=False, verdict="inconclusive", details=details, reason=reason
        )
    note = f" (as {why.split(':', 1)[0]} allows: {'; '.join(j.explained)})" if j.explained else ""
    return GuardDecision(
        guard="no_doing_less",
        passed=True,
        details=details,
        reason=f"the same work was done (within {tol:.0%}){note}",
    )
