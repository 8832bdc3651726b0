"""The diagnoser agent: a traced baseline, its diagnosis, and whether I/O is worth tuning.

The baseline runs the workload's replicates exactly as every later experiment will (same
count, same tracing). The diagnosis covers the replicates that finished; failed or
timed-out ones are recorded as such, so every report can state partial coverage instead of
passing a partial result off as the complete picture (partial baselines, dftracer-io-optimization skill).
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.measure import coverage_of, measure_baseline, sample_stacks
from dftune.core.domain.diagnosis import PossiblyIo
from dftune.core.domain.run import TuningState, Update, log, update
from dftune.core.facts import stack_facts
from dftune.core.facts.stacks import Stack
from dftune.tools.diagnose.engine import diagnose_analysis, metric_wait_patterns
from dftune.tools.diagnose.library_time import library_time, possibly_io, read_samples
from dftune.tools.diagnose.stack import infer_stack
from dftune.tools.diagnose.unseen import metric_wait
from dftune.tools.runner import progress_text
from dftune.tools.runner.bench import STOPPED_BY_SPEC, BenchError
from dftune.tools.runner.sampling import sampler_settings, unavailable


def diagnoser(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: measure the baseline (traced), diagnose it, apply the worth-tuning gate."""
    ctx = runtime.context
    spec = ctx.workload_spec
    n = state.replicates or spec.replicates
    traced = spec.tracing.mode != "off"
    workdir = ctx.workspace.baseline_dir(state.run_id)
    ctx.progress("diagnoser", progress_text.baseline_start(spec, n, traced))
    try:
        baseline, analysis, result = measure_baseline(
            ctx,
            state.run_id,
            spec,
            workdir=workdir,
            replicates=n,
            traced=traced,
            progress=lambda done, total, rep: ctx.progress(
                "diagnoser", progress_text.replicate_line(spec, done, total, rep)
            ),
        )
    except BenchError as exc:
        return update(
            status="failed",
            status_reason=f"baseline could not run: {exc}",
            events=[log("diagnoser", f"baseline failed: {exc}")],
        )
    coverage = coverage_of(result, n)
    included, failed, pending = coverage.units_included, coverage.units_failed, coverage.units_pending
    events = [
        log(
            "diagnoser",
            f"baseline: {baseline.ok}/{n} replicates ok, median {baseline.median}",
            ci95=baseline.ci95,
            notes=baseline.notes,
        )
    ]
    out: dict[str, Any] = {
        "baseline": baseline,
        "incumbent": baseline,
        "coverage": coverage,
        "system": state.system or platform.node() or "localhost",
        "workload": spec.name,
    }
    if baseline.ok < 1 or len(included) < min(3, n):
        stopped = result.stopped_reason or ""
        if stopped.startswith(STOPPED_BY_SPEC):  # a mistake in the spec: its fix
            reason = f"baseline: {stopped.removeprefix(STOPPED_BY_SPEC)}"
        else:
            why = _first_failure(result)
            reason = (
                f"baseline: only {baseline.ok} of {n} replicates succeeded{'; ' + stopped if stopped else ''}"
                f": nothing can be compared{f' (first failure: {why})' if why else ''}"
            )
        out.update(status="failed", status_reason=reason)
        return update(out, events=events)
    data_dir = spec.placeholder_values(result.settings, workdir=workdir).get("data_dir")
    stack = infer_stack(
        spec.render(spec.command, result.settings, workdir=workdir),
        cwd=spec.resolve(spec.cwd),
        launcher=spec.launcher.kind,
        analysis=analysis,
        mpi_beside=Path(sys.executable).parent,
    )
    out["software"] = stack.software
    if stack.evidence:
        ctx.progress("diagnoser", f"stack: {', '.join(stack.software)} ({'; '.join(stack.evidence)[:300]})")
        events.append(log("diagnoser", f"stack: {', '.join(stack.software)}", evidence=stack.evidence))
    if analysis is None:
        events.append(
            log(
                "diagnoser",
                "no trace (tracing off): the spec's knobs are the only levers; "
                "the no-doing-less guard cannot run",
            )
        )
        return update(out, events=events)
    waits = _reported_waits(spec, baseline, result)
    data_dirs = [data_dir] if data_dir else []
    diagnosis = diagnose_analysis(analysis, data_dirs=data_dirs, stack=stack, reported_waits=waits)
    if not diagnosis.worth_tuning:  # before giving up: the time inside its I/O libraries
        inside, note = _library_time(ctx, state.run_id, spec, stack, workdir, result)
        if note:
            ctx.progress("diagnoser", note)
            events.append(log("diagnoser", note))
        if inside is not None:
            diagnosis = diagnose_analysis(
                analysis, data_dirs=data_dirs, stack=stack, reported_waits=[*waits, inside]
            )
    out["diagnosis"] = diagnosis
    out["fs_type"] = diagnosis.fs_type
    names = ", ".join(sorted({b.category for b in diagnosis.bottlenecks})) or "none"
    events.append(
        log(
            "diagnoser",
            f"diagnosis: bottlenecks {names}; metric {diagnosis.metric.metric}; "
            f"I/O {100 * diagnosis.io_fraction:.1f}% of process time; {diagnosis.gate.reason}",
            coverage=coverage.model_dump(),
        )
    )
    if coverage.partial:
        events.append(
            log(
                "diagnoser",
                f"partial baseline: diagnosis covers {', '.join(included)}; "
                f"not covered: {', '.join(failed + pending)}",
            )
        )
    if not diagnosis.worth_tuning and state.force:
        diagnosis.gate.forced = True
        events.append(
            log(
                "diagnoser",
                f"the gate says not worth tuning ({diagnosis.gate.reason}); tuning anyway, as --force asks",
            )
        )
    elif not diagnosis.worth_tuning:
        out.update(
            status="not_worth_tuning",
            status_reason=f"{diagnosis.gate.reason} (to tune it anyway: "
            f"dftune run --force {spec_arg(state)})",
        )
    return update(out, events=events)


def spec_arg(state: TuningState) -> str:
    """The spec as the person would pass it again (its path)."""
    return state.spec_path


def _reported_waits(spec: Any, baseline: Any, result: Any) -> list[PossiblyIo]:
    """The program's own I/O or wait time, when its metric is one (see tools/diagnose/unseen.py)."""
    walls = sorted(r.wall_s for r in result.replicates if r.status == "ok" and r.wall_s)
    wall = walls[len(walls) // 2] if walls else None
    got = metric_wait(spec.metric, baseline.median, wall, metric_wait_patterns())
    return [got] if got is not None else []


def _library_time(
    ctx: Context, run_id: str, spec: Any, stack: Stack, workdir: Path, result: Any
) -> tuple[PossiblyIo | None, str]:
    """The share of one sampled run the program spent inside its I/O libraries, and what to say.

    Only for a stack with a library whose frames can be told apart (stacks.toml ``frames``); the
    samples count every such library, detected or not (a sampled frame is evidence of its own)."""
    frames = {s.id: s.frames for s in stack_facts().stack if s.frames}
    shown = [lib for lib in frames if stack.has(lib)]
    if not shown:
        return None, ""
    names = ", ".join(shown)
    why = unavailable(spec.launcher.kind)
    if why is None:
        ctx.progress("diagnoser", f"sampling one more run's stacks for its time inside {names}")
        index = max((r.index for r in result.replicates), default=-1) + 1
        text, wall, why = sample_stacks(ctx, run_id, spec, workdir=workdir, index=index)
    if why:
        return None, f"time inside {names} not sampled: {why}"
    settings = sampler_settings()
    got = library_time(read_samples(text), frames)
    inside = possibly_io(got, wall, min_samples=settings.min_samples, rate_hz=settings.rate_hz)
    if inside is None:
        seen = got.samples if got else 0
        return None, f"time inside {names}: {seen} sample(s) of the program's main thread, too few to say"
    return inside, f"time inside {names}: {inside.evidence}"


def _first_failure(result: Any) -> str:
    """Why the first failed replicate failed (its exit code and stderr), for the run's one-line reason."""
    return next(
        (f"r{r.index} {r.status}: {r.reason}" for r in result.replicates if r.status != "ok" and r.reason), ""
    )
