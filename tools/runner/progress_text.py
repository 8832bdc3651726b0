"""The lines a person watches during the long steps: each baseline replicate, each pair of a
paired sitting. Pure text (the agents hand it to their progress callback); the counts are the
ones the runner is working to at that moment, so a sitting extended from 5 to 10 pairs says
``pair 6/10``, never ``up to 5`` followed by ``6``."""

from __future__ import annotations

from dftune.tools.runner.bench import Replicate
from dftune.tools.runner.spec import WorkloadSpec


class Transient(str):
    """A progress line the next one replaces on a terminal (a replicate, a pair): the count moves
    in place instead of scrolling the screen away. Off a terminal it is an ordinary line."""


def metric_text(spec: WorkloadSpec, value: float | None) -> str:
    """A metric value with its unit (wall time in seconds; a printed number as printed)."""
    if value is None:
        return "no value"
    return f"{value:.3f} s" if spec.metric.kind == "wall_time" else f"{value:.4g}"


def _outcome(spec: WorkloadSpec, rep: Replicate) -> str:
    if rep.status == "ok":
        return metric_text(spec, rep.metric)
    return f"{rep.status}" + (f" ({rep.reason[:240]})" if rep.reason else "")


def baseline_start(spec: WorkloadSpec, replicates: int, traced: bool) -> str:
    """What the baseline is about to do and what it measures."""
    how = " traced" if traced else ""
    return f"baseline: {replicates} replicate(s) of {spec.name}{how}; metric: {spec.metric_label()}"


def replicate_line(spec: WorkloadSpec, done: int, total: int, rep: Replicate, what: str = "baseline") -> str:
    return Transient(f"{what} replicate {done}/{total}: {_outcome(spec, rep)}")


def sitting_start(iteration: int, change: str, pairs: int) -> str:
    """The plan of a paired sitting, with the counts it can really end at."""
    return Transient(
        f"opt{iteration}: {pairs} interleaved pair(s) of the incumbent and {change} "
        f"(fewer once the numbers decide; up to {2 * pairs} if a large effect stays unclear)"
    )


def pair_line(
    spec: WorkloadSpec, iteration: int, done: int, planned: int, ref: Replicate, cand: Replicate
) -> str:
    return Transient(
        f"opt{iteration}: pair {done}/{planned}: incumbent "
        f"{_outcome(spec, ref)}, candidate {_outcome(spec, cand)}"
    )
