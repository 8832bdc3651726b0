"""Measure one condition the same way for the baseline and every experiment.

The diagnoser measures the baseline with :func:`measure`; the verifier measures each experiment
against a fresh run of the incumbent with :func:`measure_paired` (the two arms interleaved in one
sitting), so the two arms of a comparison always have the same replicates, tracing, cache policy
and conditions. The fullest successful replicate trace (:func:`fullest_trace`: a tracer may lose
a thread's last events in one replicate) is analyzed and saved next to the bench as
``analysis.json``: the no-doing-less guard compares those, and the KB record is built from them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dftune.agents.context import Context
from dftune.core import strictjson
from dftune.core.domain.measurements import Coverage, Measurement, StagePlan
from dftune.core.facts.paths import NO_RUN, RunPaths
from dftune.tools.runner.bench import BenchError, BenchResult, Progress, Replicate, bench
from dftune.tools.runner.measurer import Measurer
from dftune.tools.runner.paired import ArmPlan, PairedResult, PairProgress, paired_bench
from dftune.tools.runner.spec import WorkloadSpec
from dftune.tools.runner.staging import staged_path
from dftune.tools.trace import Analysis, TraceError, analyze

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
    progress: Progress | None = None,
    measurer: Measurer,
) -> tuple[Measurement, Analysis | None, BenchResult]:
    run_spec = spec.relocated(Path(source_dir)) if source_dir else spec
    result = bench(
        run_spec,
        overrides=overrides,
        replicates=replicates,
        trace=traced,
        workdir=workdir,
        env=env,
        progress=progress,
        measurer=measurer,
    )
    data_dir = run_spec.placeholder_values(result.settings, workdir=workdir).get("data_dir")
    paths = RunPaths.of(str(data_dir) if data_dir else None, env=env)
    m, analysis, result = _summarize(result, workdir, env, traced, views, reuse_analysis=False, paths=paths)
    return (
        m.model_copy(update={"source_dir": source_dir, "data_dir": str(data_dir) if data_dir else None}),
        analysis,
        result,
    )


def measure_paired(
    spec: WorkloadSpec,
    *,
    reference: Measurement,
    ref_workdir: Path,
    workdir: Path,
    overrides: dict[str, str],
    env: dict[str, str],
    replicates: int,
    source_dir: str | None = None,
    extend_at_pct: float = 5.0,
    progress: PairProgress | None = None,
    stage: StagePlan | None = None,
    measurer: Measurer,
) -> tuple[Measurement, Measurement, PairedResult]:
    """The incumbent (``reference``'s condition) and the candidate, interleaved in one sitting, each
    traced as the reference was and summarized as :func:`measure` would (its own analysis).
    ``stage``: the candidate stages its data folder in every replicate (the reference as it did)."""
    ref_spec = spec.relocated(Path(reference.source_dir)) if reference.source_dir else spec
    cand_spec = spec.relocated(Path(source_dir)) if source_dir else spec
    ref_plan = ArmPlan(
        ref_spec,
        ref_workdir,
        settings_text(reference.settings),
        dict(reference.env),
        reference.traced,
        reference.stage,
    )
    cand_plan = ArmPlan(cand_spec, workdir, overrides, env, reference.traced, stage)
    sitting = paired_bench(
        ref_plan,
        cand_plan,
        max_pairs=replicates,
        extra_pairs=replicates,
        lower_is_better=spec.metric.lower_is_better,
        extend_at_pct=extend_at_pct,
        progress=progress,
        measurer=measurer,
    )
    out = []
    for plan, result, src in (
        (ref_plan, sitting.reference, reference.source_dir),
        (cand_plan, sitting.candidate, source_dir),
    ):
        data_dir = plan.spec.placeholder_values(result.settings, workdir=plan.workdir).get("data_dir")
        staged = (
            str(staged_path(plan.stage, str(plan.workdir.resolve()), Path(data_dir)))
            if plan.stage is not None and data_dir
            else None
        )
        paths = RunPaths.of(str(data_dir) if data_dir else None, staged, env=plan.env)
        m, analysis, _ = _summarize(
            result, plan.workdir, plan.env, plan.traced, ("file", "proc"), reuse_analysis=False, paths=paths
        )
        update: dict[str, Any] = {
            "source_dir": src,
            "data_dir": str(data_dir) if data_dir else None,
            "stage": plan.stage,
            "staged_dir": staged,
        }
        if plan.stage is not None and m.io_bandwidth and analysis is not None:
            io_wall = analysis.io_wall_time_s or analysis.io_time_s
            update["io_bandwidth"] = staged_bandwidth(m.io_bandwidth, io_wall, result.replicates)
        out.append(m.model_copy(update=update))
    return out[0], out[1], sitting


def _summarize(
    result: BenchResult,
    workdir: Path,
    env: dict[str, str],
    traced: bool,
    views: tuple[str, ...],
    *,
    reuse_analysis: bool,
    paths: RunPaths = NO_RUN,
) -> tuple[Measurement, Analysis | None, BenchResult]:
    strictjson.write_file(workdir / BENCH_FILE, result.to_json_dict(), indent=1)
    analysis: Analysis | None = None
    analysis_path: Path | None = None
    if reuse_analysis and (workdir / ANALYSIS_FILE).is_file():  # the arm's analysis stands
        analysis_path = workdir / ANALYSIS_FILE
        analysis = strictjson.read_model(analysis_path, Analysis)
    fullest = Fullest() if analysis is not None or not traced else fullest_trace(result, paths, views)
    seen = fullest.seen
    if seen and sum(map(len, seen.values())) <= MAX_SEEN_PATHS:  # for the guards (arm_of)
        strictjson.write_file(workdir / SEEN_FILE, {d: sorted(v) for d, v in seen.items()})
    first_ok, trace_notes = fullest.replicate, fullest.notes
    if traced and first_ok is not None and first_ok.trace_dir:
        # the application's I/O: helper processes (a pyenv shim's bash, a launch script) left out
        analysis = fullest.analysis or analyze(
            [first_ok.trace_dir], views=list(views), profile=True, exclude_helpers=True, run_paths=paths
        )
        analysis_path = workdir / ANALYSIS_FILE
        strictjson.write_file(analysis_path, analysis.to_json_dict())
    work, work_notes = replicate_work(result)
    m = Measurement(
        settings=dict(result.settings),
        env=dict(env),
        values=result.values(),
        median=result.median,
        ci95=result.ci95,
        ok=result.ok,
        replicates=len(result.replicates),
        traced=result.traced,
        workdir=str(workdir),
        trace_dir=result.trace_dir,
        analysis_path=str(analysis_path) if analysis_path else None,
        io_bandwidth=io_bandwidth(analysis),
        io_time_s=analysis.io_time_s if analysis else None,
        unoverlapped_io_fraction=analysis.unoverlapped_io_fraction if analysis else None,
        work=work,
        notes=[*result.notes, *work_notes, *trace_notes],
        stopped_reason=result.stopped_reason,
    )
    return m, analysis, result


#: the files any replicate of an arm read and wrote, beside analysis.json: a file the analyzed
#: replicate's trace lacks but another's holds was lost by the tracer, not left out by the program
SEEN_FILE = "replicate_files.json"
#: more paths than this are not written (a data set of many small files: the guards then judge
#: the analyzed replicate alone)
MAX_SEEN_PATHS = 200_000
#: relative difference of I/O bytes between replicate traces that is worth a note
TRACE_AGREEMENT = 0.001
#: replicate traces compared before one is analyzed in full (tuning traces are small)
MAX_TRACES_COMPARED = 5


@dataclass
class Fullest:
    """The replicate an arm is judged by, its analysis, and what the other replicates said."""

    replicate: Replicate | None = None
    #: its analysis with the views asked for (None: to be made by the caller)
    analysis: Analysis | None = None
    notes: list[str] = field(default_factory=list)
    #: the files any compared replicate read and wrote, by direction (several replicates only)
    seen: dict[str, set[str]] = field(default_factory=dict)


def fullest_trace(result: BenchResult, paths: RunPaths = NO_RUN, views: Sequence[str] = ()) -> Fullest:
    """The successful replicate whose trace holds the most I/O (bytes, then calls), analyzed once
    with ``views`` and its access profile, and a note when the traces disagree. A tracer that lost
    a thread's last events in one replicate must not make the program look as if it did less: one
    that really does less does so in every replicate. The files every compared replicate touched
    are kept too (the guards' evidence of a tracer loss)."""
    oks = [r for r in result.replicates if r.status == "ok" and r.trace_dir][:MAX_TRACES_COMPARED]
    work: dict[int, tuple[int, int]] = {}
    out = Fullest(replicate=oks[0] if oks else None)
    most = (-1, -1)
    for r in oks:
        try:
            a = analyze(
                [r.trace_dir],  # type: ignore[list-item]
                views=list(views),
                profile=True,  # every file, not the file view's top 1,000
                exclude_helpers=True,
                run_paths=paths,
            )
        except TraceError:
            continue
        work[r.index] = ((a.read.bytes or 0) + (a.write.bytes or 0), a.read.count + a.write.count)
        if out.analysis is None or work[r.index] > most:
            out.replicate, out.analysis, most = r, a, work[r.index]
        for f in a.profile.files if a.profile is not None else []:
            for d in ("read", "write"):
                if getattr(f, f"{d}_bytes") > 0:
                    out.seen.setdefault(d, set()).add(f.path)
    if len(work) <= 1:
        out.seen = {}
        return out
    assert out.replicate is not None
    low, best = min(work, key=work.__getitem__), out.replicate.index
    top = work[best][0]
    if top and (top - work[low][0]) / top > TRACE_AGREEMENT:
        out.notes.append(
            f"replicate traces disagree: r{low} holds {100 * (top - work[low][0]) / top:.1f}% fewer "
            f"I/O bytes than r{best} (events the tracer lost?); r{best} is analyzed"
        )
    return out


def replicate_work(result: BenchResult) -> tuple[dict[str, float], list[str]]:
    """The work counters of the arm (the first successful replicate's), and a note when the
    replicates disagree (the program did not do the same work every time)."""
    ok = [r.work for r in result.replicates if r.status == "ok" and r.work]
    if not ok:
        return {}, []
    varied = sorted(k for k in ok[0] if any(w.get(k) != ok[0][k] for w in ok[1:]))
    note = [f"work counters differ between replicates: {', '.join(varied)}"] if varied else []
    return dict(ok[0]), note


def measure_baseline(
    ctx: Context,
    run_id: str,
    spec: WorkloadSpec,
    *,
    workdir: Path,
    replicates: int,
    traced: bool,
    progress: Progress | None = None,
) -> tuple[Measurement, Analysis | None, BenchResult]:
    """The baseline arm: measured here, or (in a campaign) collected from its independent units.

    With units, this returns as soon as enough of them succeeded (the rest join later, see
    :func:`joined_baseline`); :class:`~dftune.tools.runner.units.BaselineNotReady` when the
    deadline comes first (the run stays resumable and keeps the units already measured)."""
    budget = ctx.budget
    run = functools.partial(
        measure,
        workdir=workdir,
        overrides={},
        env={},
        replicates=replicates,
        traced=traced,
        progress=progress,
        measurer=ctx.measurer,
    )
    if budget is None:
        return run(spec)
    run_dir = ctx.workspace.run_dir(run_id)
    if budget.units is not None:
        result = budget.units.wait_ready()
        budget.record(
            run_dir,
            "baseline units",
            budget.units.elapsed_s() / max(1, len(result.replicates)) * (replicates + 1),
            kind="baseline",
        )  # n replicates and a warm-up, at the unit cost
        data_dir = spec.placeholder_values(result.settings, workdir=workdir).get("data_dir")
        paths = RunPaths.of(str(data_dir) if data_dir else None)
        with budget.job(run_dir, "baseline analysis", spec, arm=False) if traced else nullcontext(spec):
            m, analysis, result = _summarize(
                result, workdir, {}, traced, ("file", "proc"), reuse_analysis=False, paths=paths
            )
        return m.model_copy(update={"data_dir": str(data_dir) if data_dir else None}), analysis, result
    with budget.job(run_dir, "the baseline", spec, kind="baseline") as capped:
        return run(capped)


#: the most of a sampled run's stacks read back (py-spy writes one line per distinct stack)
STACKS_READ_LIMIT = 32 << 20


def sample_stacks(
    ctx: Context, run_id: str, spec: WorkloadSpec, *, workdir: Path, index: int
) -> tuple[str, float | None, str]:
    """One more untraced run of the baseline, under the stack sampler (tools/runner/sampling.py),
    in the baseline's prepared folder: (the sampled stacks, the run's wall time, why there are none).
    """
    out = workdir / "stacks"

    def run(s: WorkloadSpec) -> BenchResult:
        return bench(
            s,
            overrides={},
            replicates=1,
            trace=False,
            workdir=workdir,
            prepare=False,
            first_index=index,
            sample=out,
            measurer=ctx.measurer,
        )

    budget = ctx.budget
    try:
        if budget is None:
            result = run(spec)
        else:
            with budget.job(
                ctx.workspace.run_dir(run_id), "the stack sample", spec, kind="baseline"
            ) as capped:
                result = run(capped)
    except BenchError as exc:  # out of time included
        return "", None, str(exc)
    rep = result.replicates[0] if result.replicates else None
    path = out / f"r{index}.txt"
    try:
        with path.open("rb") as fh:
            text = fh.read(STACKS_READ_LIMIT).decode("utf-8", errors="replace")
    except OSError:
        text = ""
    if not text.strip():
        ran = f"the run {rep.status}{': ' + rep.reason if rep.reason else ''}" if rep else "no run"
        return "", None, f"the sampler wrote no stacks ({ran})"
    return text, rep.wall_s if rep else None, ""


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
    joined = m.model_copy(update={"source_dir": baseline.source_dir, "data_dir": baseline.data_dir})
    return joined, coverage_of(result, replicates)


def io_bandwidth(a: Analysis | None) -> float | None:
    """Trace-derived system-metric proxy (dftracer-io-optimization skill): bytes per second of I/O time."""
    if a is None:
        return None
    moved = (a.read.bytes or 0) + (a.write.bytes or 0)
    wall = a.io_wall_time_s or a.io_time_s
    return moved / wall if moved and wall > 0 else None


def staged_bandwidth(bandwidth: float, io_wall_s: float, replicates: list[Replicate]) -> float:
    """A staged arm's I/O bandwidth with the copies' seconds (the median replicate's) counted as I/O
    time: the trace sees only the reads of the fast copy, not the copy that made it."""
    seconds = sorted(r.stage_s for r in replicates if r.status == "ok" and r.stage_s)
    if not seconds or io_wall_s <= 0:
        return bandwidth
    return bandwidth * io_wall_s / (io_wall_s + seconds[len(seconds) // 2])


def load_analysis(path: str | None) -> Analysis | None:
    """A measurement's saved analysis, read strictly (a corrupt file is one line naming it)."""
    if not path:
        return None
    return strictjson.read_model(path, Analysis)


def settings_text(settings: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in settings.items()}
