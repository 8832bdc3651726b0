"""Measure one condition the same way for the baseline and every experiment.

The diagnoser and the verifier both call :func:`measure`, so the two arms of a comparison
always have the same replicates, tracing and cache policy. The first successful replicate's
trace is analyzed and saved next to the bench as ``analysis.json``: the no-doing-less guard
compares those, and the KB record is built from them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dftune.agents.context import Context
from dftune.agents.state import Coverage, Measurement
from dftune.tools.runner.bench import BenchResult, bench, summary_stats
from dftune.tools.runner.spec import WorkloadSpec
from dftune.tools.trace import Analysis, analyze

ANALYSIS_FILE = "analysis.json"
BENCH_FILE = "bench.json"


def measure(
    spec: WorkloadSpec,
    *,
    workdir: Path,
    overrides: dict[str, str],
    env: dict[str, str],
    replicates: int,
    traced: bool,
    views: tuple[str, ...] = ("file", "proc"),
    source_dir: str | None = None,
) -> tuple[Measurement, Analysis | None, BenchResult]:
    run_spec = spec.relocated(Path(source_dir)) if source_dir else spec
    result = bench(
        run_spec, overrides=overrides, replicates=replicates, trace=traced, workdir=workdir, env=env
    )
    m, analysis, result = _summarize(result, workdir, env, traced, views, reuse_analysis=False)
    return m.model_copy(update={"source_dir": source_dir}), analysis, result


def extend(
    spec: WorkloadSpec, m: Measurement, *, overrides: dict[str, str], replicates: int
) -> tuple[Measurement, Analysis | None, BenchResult]:
    """More replicates of the same condition in the same workdir (an inconclusive comparison)."""
    workdir = Path(m.workdir)
    earlier = BenchResult.model_validate_json((workdir / BENCH_FILE).read_bytes())
    spec = spec.relocated(Path(m.source_dir)) if m.source_dir else spec
    more = bench(spec, overrides=overrides, replicates=replicates, trace=m.traced, workdir=workdir, env=m.env,
                 first_index=len(earlier.replicates))  # fmt: skip
    reps = [*earlier.replicates, *more.replicates]
    values = [r.metric for r in reps if r.status == "ok" and r.metric is not None]
    median, p95, ci95 = summary_stats(values)
    merged = earlier.model_copy(update={
        "replicates": reps, "ok": len(values), "median": median, "p95": p95, "ci95": ci95,
        "notes": [*earlier.notes, f"{replicates} more replicate(s) added: the first comparison was inconclusive"],
        "stopped_reason": more.stopped_reason or earlier.stopped_reason,
    })  # fmt: skip
    m2, analysis, merged = _summarize(merged, workdir, m.env, m.traced, (), reuse_analysis=True)
    return m2.model_copy(update={"source_dir": m.source_dir}), analysis, merged


def _summarize(
    result: BenchResult,
    workdir: Path,
    env: dict[str, str],
    traced: bool,
    views: tuple[str, ...],
    *,
    reuse_analysis: bool,
) -> tuple[Measurement, Analysis | None, BenchResult]:
    (workdir / BENCH_FILE).write_text(json.dumps(result.to_json_dict(), indent=1), encoding="utf-8")
    analysis: Analysis | None = None
    analysis_path: Path | None = None
    if reuse_analysis and (workdir / ANALYSIS_FILE).is_file():  # the first replicate's analysis stands
        analysis_path = workdir / ANALYSIS_FILE
        analysis = Analysis.model_validate_json(analysis_path.read_bytes())
    first_ok = (
        None
        if analysis is not None
        else next((r for r in result.replicates if r.status == "ok" and r.trace_dir), None)
    )
    if traced and first_ok is not None and first_ok.trace_dir:
        analysis = analyze([first_ok.trace_dir], views=list(views))
        analysis_path = workdir / ANALYSIS_FILE
        analysis_path.write_text(json.dumps(analysis.to_json_dict()), encoding="utf-8")
    m = Measurement(
        settings=dict(result.settings), env=dict(env), values=result.values(), median=result.median,
        ci95=result.ci95, ok=result.ok, replicates=len(result.replicates), traced=result.traced,
        workdir=str(workdir), trace_dir=result.trace_dir,
        analysis_path=str(analysis_path) if analysis_path else None,
        io_bandwidth=io_bandwidth(analysis), io_time_s=analysis.io_time_s if analysis else None,
        unoverlapped_io_fraction=analysis.unoverlapped_io_fraction if analysis else None,
        notes=list(result.notes), stopped_reason=result.stopped_reason,
    )  # fmt: skip
    return m, analysis, result


def measure_baseline(ctx: Context, run_id: str, spec: WorkloadSpec, *, workdir: Path, replicates: int,
                     traced: bool) -> tuple[Measurement, Analysis | None, BenchResult]:  # fmt: skip
    """The baseline arm: measured here, or (in a campaign) collected from its independent units.

    With units, this returns as soon as enough of them succeeded (the rest join later, see
    :func:`joined_baseline`); :class:`~dftune.tools.runner.units.BaselineNotReady` when the
    deadline comes first (the run stays resumable and keeps the units already measured)."""
    budget = ctx.budget
    if budget is None:
        return measure(spec, workdir=workdir, overrides={}, env={}, replicates=replicates, traced=traced)
    run_dir = ctx.workspace.run_dir(run_id)
    if budget.units is not None:
        result = budget.units.wait_ready()
        budget.record(run_dir, "baseline units", budget.units.elapsed_s() / max(1, len(result.replicates))
                      * (replicates + 1))  # an arm of n replicates and its warm-up, at the measured unit cost  # fmt: skip
        if not traced:  # nothing to analyze: no need to wait for a measurement slot
            return _summarize(result, workdir, {}, traced, ("file", "proc"), reuse_analysis=False)
        with budget.job(run_dir, "baseline analysis", spec, arm=False):
            return _summarize(result, workdir, {}, traced, ("file", "proc"), reuse_analysis=False)
    with budget.job(run_dir, "the baseline", spec) as capped:
        return measure(capped, workdir=workdir, overrides={}, env={}, replicates=replicates, traced=traced)


def coverage_of(result: BenchResult, replicates: int) -> Coverage:
    """Which replicates of an arm are in its statistics, which failed, which are still pending."""
    seen = {r.index for r in result.replicates}
    return Coverage(
        units_total=replicates,
        units_included=[f"replicate r{r.index}" for r in result.replicates if r.status == "ok"],
        units_failed=[f"replicate r{r.index} ({r.status})" for r in result.replicates if r.status != "ok"],
        units_pending=[f"replicate r{i}" for i in range(replicates) if i not in seen],
    )


def joined_baseline(
    ctx: Context, baseline: Measurement | None, replicates: int
) -> tuple[Measurement, Coverage] | None:
    """The baseline with the units that finished since it was taken (None when nothing new joined)."""
    units = ctx.budget.units if ctx.budget else None
    if units is None or baseline is None:
        return None
    result = units.result()
    if result is None or len(result.replicates) <= baseline.replicates:
        return None
    m, _, result = _summarize(result, Path(baseline.workdir), {}, baseline.traced, (), reuse_analysis=True)
    return m.model_copy(update={"source_dir": baseline.source_dir}), coverage_of(result, replicates)


def io_bandwidth(a: Analysis | None) -> float | None:
    """The seed's system-metric proxy: bytes moved per second of I/O wall time, from the trace."""
    if a is None:
        return None
    moved = (a.read.bytes or 0) + (a.write.bytes or 0)
    wall = a.io_wall_time_s or a.io_time_s
    return moved / wall if moved and wall > 0 else None


def load_analysis(path: str | None) -> Analysis | None:
    if not path:
        return None
    return Analysis.model_validate_json(Path(path).read_bytes())


def settings_text(settings: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in settings.items()}
