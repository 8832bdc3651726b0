"""Two arms measured interleaved in the same sitting (A B, B A, A B ...), stopping once the data decide.

A comparison of an experiment with an incumbent measured hours earlier mixes the change with
whatever drifted since (other jobs, the page cache, thermal state, a file system's load). Run
alternately, both arms see the same conditions, and a drift shows up in both. The order within a
pair alternates (A B, then B A: a counterbalanced, ABBA design), so a steady drift (a load
that builds up, caches and clocks that warm up) favours neither arm and the pairs can be
compared pair by pair (``compare(..., paired=True)``). Each arm keeps
its own workdir (prepared once: setup and warm-up run before its first replicate only), its
own trace folders and its own ``BenchResult``, exactly as ``bench`` would write them.

After every pair from ``MIN_REPLICATES`` on, :func:`~dftune.tools.runner.stats.early_stop`
may end the sitting: the verdict is already clear, or the effect cannot reach the minimum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dftune.core.domain.measurements import StagePlan
from dftune.tools.runner.bench import (
    MAX_CONSECUTIVE_FAILURES,
    BenchResult,
    Replicate,
    bench,
    staging_note,
)
from dftune.tools.runner.measurer import Measurer
from dftune.tools.runner.spec import WorkloadSpec
from dftune.tools.runner.stats import early_stop, undecided

#: told after every pair: (pairs done, pairs planned now, the reference's replicate, the candidate's)
PairProgress = Callable[[int, int, Replicate, Replicate], None]


@dataclass(frozen=True)
class ArmPlan:
    """One condition of the sitting."""

    spec: WorkloadSpec
    workdir: Path
    overrides: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    traced: bool = False
    #: the arm runs every replicate on a staged copy of its data folder (tools/runner/staging.py)
    stage: StagePlan | None = None


@dataclass(frozen=True)
class PairedResult:
    reference: BenchResult
    candidate: BenchResult
    pairs: int
    #: why the sitting ended before ``max_pairs`` (None: it ran them all)
    stopped_early: str | None


#: how a sitting says the program refused the candidate's settings in its first replicate
REJECTED_FIRST = (
    "the program refused the candidate's settings in its first replicate, where the incumbent's ran"
)


def paired_bench(
    reference: ArmPlan,
    candidate: ArmPlan,
    *,
    max_pairs: int,
    lower_is_better: bool,
    extra_pairs: int = 0,
    extend_at_pct: float = 5.0,
    progress: PairProgress | None = None,
    measurer: Measurer | None = None,
) -> PairedResult:
    """Alternate one replicate of ``reference`` and one of ``candidate`` until the data decide or
    ``max_pairs`` pairs ran. A comparison still undecided then (no_change, but its CI still reaches
    an ``extend_at_pct`` improvement, or the medians moved that much: :func:`undecided`) gets up to
    ``extra_pairs`` more, once, judged by the same test. A
    :class:`~dftune.tools.runner.bench.BenchError` (setup, tracer) propagates as from ``bench``.
    ``measurer`` starts both arms' programs (None: the real one, as in ``bench``)."""
    arms = (reference, candidate)
    firsts: list[BenchResult | None] = [None, None]
    reps: list[list[Replicate]] = [[], []]
    notes: list[list[str]] = [[], []]
    failures = [0, 0]
    stopped: list[str | None] = [None, None]
    early: str | None = None
    limit, k = max_pairs, 0
    while k < limit:
        for side in (0, 1) if k % 2 == 0 else (1, 0):  # A B, B A, ...: a steady drift cancels
            arm = arms[side]
            one = bench(
                arm.spec,
                overrides=arm.overrides,
                replicates=1,
                trace=arm.traced,
                workdir=arm.workdir,
                env=arm.env,
                first_index=k,
                prepare=k == 0,
                stage=arm.stage,
                measurer=measurer,
            )
            if firsts[side] is None:
                firsts[side] = one
                notes[side] = [
                    *(n for n in one.notes if not n.startswith("staged ")),  # said once, over all pairs
                    "interleaved with the other arm of the comparison (A B, B A, ...)",
                ]
            rep = one.replicates[0]
            reps[side].append(rep)
            failures[side] = failures[side] + 1 if rep.status != "ok" else 0
            if failures[side] >= MAX_CONSECUTIVE_FAILURES and stopped[side] is None:
                stopped[side] = (
                    f"stopped after {failures[side]} failed replicates in a row; last: {rep.status} "
                    f"({rep.reason})"
                )
        k += 1
        if progress:
            progress(k, limit, reps[0][-1], reps[1][-1])
        first_ref, first_cand = reps[0][0], reps[1][0]
        if k == 1 and first_cand.status != "ok" and first_ref.status == "ok" and stopped[1] is None:
            # the program refused the candidate's settings where the incumbent's ran: a value it
            # rejects (a pool of 0 workers) costs one replicate, not MAX_CONSECUTIVE_FAILURES pairs
            stopped[1] = f"{REJECTED_FIRST}: {first_cand.status} ({first_cand.reason})"
        if any(stopped):
            break
        ok = [[r.metric for r in side if r.status == "ok" and r.metric is not None] for side in reps]
        whole = all(len(side) == k for side in ok)  # every pair complete: the values pair up
        if k < limit:
            early = early_stop(ok[0], ok[1], lower_is_better=lower_is_better)
            if early:
                break
        elif (
            limit == max_pairs
            and extra_pairs
            and undecided(ok[0], ok[1], lower_is_better=lower_is_better, win_pct=extend_at_pct, paired=whole)
        ):
            limit += extra_pairs
            for side in (0, 1):
                notes[side].append(
                    f"undecided after {k} pair(s) (the effect may reach {extend_at_pct:g}%, not shown): "
                    f"{extra_pairs} more pair(s)"
                )
    done = []
    for side in (0, 1):
        first = firsts[side]
        assert first is not None
        extra = [f"stopped early after {k} of {limit} pair(s): {early}"] if early else []
        arm = arms[side]
        if arm.stage is not None:
            data_dir = arm.spec.placeholder_values(first.settings, workdir=arm.workdir)["data_dir"]
            extra.append(staging_note(reps[side], str(data_dir), arm.stage))
        done.append(first.regathered(reps[side], [*notes[side], *extra], stopped[side]))
    return PairedResult(reference=done[0], candidate=done[1], pairs=k, stopped_early=early)


def paired_values(sitting: PairedResult) -> tuple[list[float], list[float]] | None:
    """The two arms' values pair by pair when every pair of the sitting measured on both sides
    (they can then be compared with ``paired=True``); None when a failed replicate broke a pair."""
    ref = [r.metric for r in sitting.reference.replicates if r.status == "ok" and r.metric is not None]
    cand = [r.metric for r in sitting.candidate.replicates if r.status == "ok" and r.metric is not None]
    if len(ref) != sitting.pairs or len(cand) != sitting.pairs:
        return None
    return ref, cand
