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

from dftune.agents.state import Measurement
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
        # the application's I/O: helper processes (a pyenv shim's bash, a launch script) left out
        analysis = analyze([first_ok.trace_dir], views=list(views), exclude_helpers=True)
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
