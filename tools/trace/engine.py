"""Analyze trace files: map each file to a partial, merge, add the requested views.

The map runs the native C scanner (:mod:`native`) in threads of this process (it
releases the GIL); files it declines run on DuckDB in local worker processes (measured:
DuckDB's Python binding gives no speed-up across threads here, processes do) or, with
``scheduler``, everything runs on a Dask distributed cluster.  Both run the
same :func:`reader.read_file` and the same :func:`merge.merge`, so results are identical.

After the map, :mod:`processes` tells the application's processes from helpers (shell
wrappers, shims, launchers) and the traces' runs apart; several runs are refused by
:func:`analyze` (never merged silently) and analyzed one by one by :func:`analyze_runs`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict, Unpack

from dftune.core.domain.diagnosis import RunInfo
from dftune.core.envnum import DAY_S, env_float
from dftune.core.errors import DftuneError, one_line
from dftune.core.facts.paths import NO_RUN, RunPaths
from dftune.tools.trace import native
from dftune.tools.trace.discover import discover
from dftune.tools.trace.errors import MultipleRunsError
from dftune.tools.trace.merge import merge
from dftune.tools.trace.model import Analysis, SkippedLine
from dftune.tools.trace.overlap import group_overlap
from dftune.tools.trace.paths import split_file_view
from dftune.tools.trace.processes import Accounting, Run, account, assign_groups, classify, rules
from dftune.tools.trace.profile import build_profile
from dftune.tools.trace.reader import FilePartial, ReadOptions, read_file, read_file_native
from dftune.tools.trace.views import VIEWS, build_view, fine_bins, path_class_totals

#: Called after each file is read: (files done, files total, path).
Progress = Callable[[int, int, str], None]
DEFAULT_TIME_WINDOWS = 20
#: Below this much trace data, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 8 << 20


class Reading(TypedDict, total=False):
    """How traces are read and analyzed (every key optional; :class:`_Ask` holds the defaults)."""

    skip_bad: bool
    views: Sequence[str]
    scheduler: str | None
    workers: int | None
    time_windows: int
    progress: Progress | None
    profile: bool
    exclude_helpers: bool
    include_system_paths: bool
    run_paths: RunPaths


@dataclass(frozen=True)
class _Ask:
    """A :class:`Reading` with its defaults filled in."""

    skip_bad: bool = False
    views: Sequence[str] = ()
    scheduler: str | None = None
    workers: int | None = None
    time_windows: int = DEFAULT_TIME_WINDOWS
    progress: Progress | None = None
    profile: bool = False
    exclude_helpers: bool = False
    include_system_paths: bool = False
    run_paths: RunPaths = NO_RUN


def analyze(paths: Iterable[str | Path], *, merge_runs: bool = False, **reading: Unpack[Reading]) -> Analysis:
    """Analyze dftracer traces or Darshan logs (files or directories) into one :class:`Analysis`.

    Traces of several separate runs raise :class:`MultipleRunsError` (use :func:`analyze_runs`),
    unless ``merge_runs`` asks for one analysis of everything.  ``exclude_helpers`` leaves the
    files that hold only helper processes out of every total (what ``diagnose`` judges).
    ``profile``: also build the per-file access profile (byte ranges, calls, sizes, the
    application's own events) that the guards and the estimates compare; it is read on the
    DuckDB path, which keeps per-access rows (the traces of tuning runs are small).
    System paths (``/proc``, ``/sys``, ``/dev``: :mod:`paths`) are left out of the file view
    unless ``include_system_paths``; the view says how many were. ``run_paths``: what the run knows
    of its own paths (its data folder is data whatever its name: core/facts/paths.py)."""
    return _analyses(paths, _Ask(**reading), split=False, merge_runs=merge_runs)[0]


def analyze_runs(paths: Iterable[str | Path], **reading: Unpack[Reading]) -> list[Analysis]:
    """One :class:`Analysis` per run the traces hold, in time order (one pass over the files)."""
    return _analyses(paths, _Ask(**reading), split=True)


def _analyses(
    paths: Iterable[str | Path],
    ask: _Ask,
    *,
    split: bool,
    merge_runs: bool = False,
) -> list[Analysis]:
    """One analysis of everything (``split`` False), or one per run."""
    paths = list(paths)
    logs = _darshan(paths, ask)
    if logs is not None:
        return [logs]
    partials, acc, unreadable = _read(paths, ask)
    runs = list(enumerate(acc.runs, 1))
    if not split:
        if len(acc.runs) > 1 and not merge_runs:
            raise MultipleRunsError(_runs_message(acc), len(acc.runs))
        runs = [(1, acc.runs[0] if len(acc.runs) == 1 else _one_run(acc))]
    return [_noted(_build(partials, run, i, len(runs), ask), unreadable) for i, run in runs]


def _noted(analysis: Analysis, unreadable: list[tuple[str, str]]) -> Analysis:
    """Links the traces name that cannot be read (``skip_bad``): listed, never silently ignored."""
    for path, why in unreadable:
        analysis.skipped.append(SkippedLine(file=path, line=None, reason=why))
        analysis.warnings.append(f"{path}: {why} (skipped)")
    return analysis


def _check_views(views: Sequence[str]) -> None:
    unknown = [v for v in views if v not in VIEWS]
    if unknown:
        raise ValueError(f"unknown view {unknown[0]!r}; choose from {', '.join(VIEWS)}")


def _darshan(paths: list[str | Path], ask: _Ask) -> Analysis | None:
    """The analysis of Darshan logs (recognised by content), or None for dftracer traces."""
    _check_views(ask.views)
    from dftune.tools.trace.darshan.detect import split_inputs

    logs, is_darshan = split_inputs(paths)
    if not is_darshan:
        return None
    from dftune.tools.trace.darshan.engine import analyze_logs

    return analyze_logs(
        logs, skip_bad=ask.skip_bad, views=ask.views, time_windows=ask.time_windows, progress=ask.progress
    )


def _read(
    paths: Iterable[str | Path], ask: _Ask
) -> tuple[list[FilePartial], Accounting, list[tuple[str, str]]]:
    _check_views(ask.views)
    unreadable: list[tuple[str, str]] = []
    files = discover(paths, unreadable, strict=not ask.skip_bad)
    # every view comes from this one pass: the time view's fine bins need no global start or end
    options = ReadOptions(
        skip_bad=ask.skip_bad,
        file_view="file" in ask.views or ask.profile,
        time_bins=fine_bins(ask.time_windows) if "time" in ask.views else None,
        profile=ask.profile,
    )
    partials = _map(files, options, ask.scheduler, ask.workers, ask.progress)
    return partials, account(partials, run_paths=ask.run_paths), unreadable


def _build(partials: list[FilePartial], run: Run, index: int, runs: int, ask: _Ask) -> Analysis:
    """The analysis of one run: its files (less those holding only helpers, when asked), merged."""
    holders: dict[int, list[bool]] = {}
    for p in run.procs:
        for f in p.files:
            holders.setdefault(f, []).append(p.helper is not None)
    keep = [f for f in sorted(run.files) if not (ask.exclude_helpers and holders.get(f) and all(holders[f]))]
    mine = [partials[f] for f in keep]
    analysis = merge(
        mine,
        accounting=Accounting(runs=[run]),
        helpers_excluded=ask.exclude_helpers,
        group_overlap=group_overlap(partials, run.procs),
    )
    analysis.run = _run_info(run, index, runs)
    for view in ask.views:
        if view != "summary":
            analysis.views[view] = build_view(view, mine, analysis, time_windows=ask.time_windows)
    if "file" in ask.views or ask.profile:  # the partials hold per-path tables: the classes' totals are exact
        analysis.path_classes = path_class_totals(mine, ask.run_paths)
        analysis.system_paths_included = ask.include_system_paths
    if "file" in analysis.views:
        split_file_view(
            analysis.views["file"], ask.include_system_paths, analysis.path_classes, ask.run_paths
        )
    if ask.profile:
        analysis.profile = build_profile(mine)
    return analysis


def _one_run(acc: Accounting) -> Run:
    """Every process as one run (``merge_runs``), helpers judged over all of them."""
    run = Run(procs=acc.procs, files={f for r in acc.runs for f in r.files})
    classify(run.procs, rules())
    assign_groups(run.procs, rules())
    return run


def _run_info(run: Run, index: int, runs: int) -> RunInfo:
    counts: dict[str, int] = {}
    for p in run.app:
        name = (p.cmd or "").replace(";", " ").strip()
        if name:
            counts[name] = counts.get(name, 0) + 1
    return RunInfo(
        index=index,
        runs=runs,
        hosts=run.hosts(),
        processes=len(run.procs),
        app_processes=len(run.app),
        helper_processes=len(run.procs) - len(run.app),
        start_us=run.first_ts,
        end_us=run.last_end,
        span_s=run.span_us / 1e6,
        commands=sorted(counts, key=lambda c: (-counts[c], c))[:5],
        apart=run.apart,
    )


def _runs_message(acc: Accounting) -> str:
    parts = []
    for i, run in enumerate(acc.runs, 1):
        hosts = ", ".join(run.hosts()[:2]) or "unknown host"
        why = f"; {run.apart}" if run.apart else ""
        parts.append(f"run {i}: {len(run.app)} process(es) on {hosts}, {run.span_us / 1e6:.3g} s{why}")
    return (
        f"the traces hold {len(acc.runs)} separate runs ({'; '.join(parts)}): analyze each run with "
        "--split-runs (MCP: split_runs=true), or pass one run's trace files"
    )


def _map(
    files: list[Path],
    options: ReadOptions,
    scheduler: str | None,
    workers: int | None,
    progress: Progress | None,
) -> list[FilePartial]:
    if scheduler:
        return _map_dask(files, options, scheduler, progress)
    n = workers or min(len(files), os.cpu_count() or 1)
    done: dict[int, FilePartial] = {}
    report = _Reporter(len(files), progress)
    if options.native and native.enabled():
        # The C scanner releases the GIL, so threads of this process keep every core busy
        # without the ~0.5 s per worker process of importing DuckDB, Arrow and numpy.
        with ThreadPoolExecutor(max_workers=max(1, n)) as threads:
            for i, got in enumerate(threads.map(lambda f: read_file_native(f, options), files)):
                if got is not None:
                    done[i] = got
                    report(files[i])
        options = replace(options, native=False)  # the rest were declined: DuckDB reads them
    rest = [f for i, f in enumerate(files) if i not in done]
    total = sum(f.stat().st_size for f in rest)
    if n <= 1 or len(rest) <= 1 or (workers is None and total < PARALLEL_MIN_BYTES):
        partials = _gather((read_file(f, options) for f in rest), rest, report)
    else:
        # spawn, not fork: the parent may already hold DuckDB threads.
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
            futures = [pool.submit(read_file, str(f), options) for f in rest]
            partials = _gather((fut.result() for fut in futures), rest, report)
    it = iter(partials)
    return [done[i] if i in done else next(it) for i in range(len(files))]


class _Reporter:
    """Progress over all files, whichever path read them: (files done, files total, path)."""

    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total, self.count, self.progress = total, 0, progress

    def __call__(self, path: Path) -> None:
        self.count += 1
        if self.progress:
            self.progress(self.count, self.total, str(path))


def _gather(results: Iterator[FilePartial], files: list[Path], report: _Reporter) -> list[FilePartial]:
    """Collect per-file partials in file order, reporting progress as each one arrives."""
    out: list[FilePartial] = []
    for path, partial in zip(files, results, strict=False):
        out.append(partial)
        report(path)
    return out


class DaskError(DftuneError):
    """The Dask cluster cannot do the map (unreachable, no workers, workers dying): one line."""


#: Seconds to reach the scheduler before ``--scheduler ADDRESS`` is reported unreachable
#: (environment: ``DFTUNE_DASK_CONNECT_S``).
DASK_CONNECT_S = 10.0
#: How often the map looks at the cluster while it waits for results.
DASK_POLL_S = 1.0
#: Defaults of the two limits (environment: ``DFTUNE_DASK_NO_WORKERS_S``, ``DFTUNE_DASK_STALL_S``):
#: how long the cluster may have no worker at all (every worker died, or an adaptive cluster
#: that never scaled up), and how long no file may finish while workers exist.
DASK_NO_WORKERS_S = 120.0
DASK_STALL_S = 3600.0


def _limit(name: str, default: float) -> float:
    """A Dask wait in seconds: more than 0, at most a day (inf, nan, 0 or -1 is refused, not defaulted)."""
    return env_float(name, default, low=0.0, high=DAY_S, low_open=True, unit="seconds")


def _map_dask(
    files: list[Path], options: ReadOptions, scheduler: Any, progress: Progress | None
) -> list[FilePartial]:
    """Read every file on a Dask cluster; never hang on a cluster that cannot answer.

    A scheduler that does not answer within ``DASK_CONNECT_S`` is reported unreachable (not
    as a bad input file); a cluster left without workers, a map that makes no progress, or
    a file whose reading kills worker after worker (``KilledWorker``) ends the analysis with
    a one-line :class:`DaskError`.  Errors of the reader itself (a bad trace) pass through.
    """
    no_workers_s = _limit("DFTUNE_DASK_NO_WORKERS_S", DASK_NO_WORKERS_S)
    stall_s = _limit("DFTUNE_DASK_STALL_S", DASK_STALL_S)
    connect_s = _limit("DFTUNE_DASK_CONNECT_S", DASK_CONNECT_S)
    try:
        from distributed import Client, KilledWorker
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise DaskError("--scheduler needs dask distributed: pip install 'dftune[dask]'") from exc
    own = isinstance(scheduler, str)
    where = (
        scheduler if own else getattr(getattr(scheduler, "scheduler", None), "address", "the Dask cluster")
    )
    if own:
        try:
            client: Any = Client(scheduler, timeout=connect_s)
        except (OSError, TimeoutError) as exc:
            raise DaskError(f"Dask scheduler {scheduler} unreachable: {one_line(exc, 300)}") from None
        except ValueError as exc:  # a malformed address
            raise DaskError(f"--scheduler {scheduler!r}: {one_line(exc, 300)}") from None
    else:
        client = scheduler
    futures: list[Any] = []
    try:
        futures = client.map(read_file, [str(f) for f in files], options=options, pure=False)
        report = _Reporter(len(files), progress)
        out: list[FilePartial] = []
        last_progress = time.monotonic()
        done_before = 0
        no_workers_since: float | None = None
        for path, fut in zip(files, futures, strict=True):
            while True:
                try:
                    out.append(fut.result(timeout=DASK_POLL_S))
                    break
                except KilledWorker as exc:
                    raise DaskError(
                        f"{path}: a Dask worker died every time it read this file (KilledWorker: "
                        f"{one_line(exc, 200)}); see the workers' logs"
                    ) from None
                except TimeoutError:
                    pass
                except Exception as exc:
                    if fut.status == "error":
                        # the reader's own failure (a bad trace, a missing file), as a local run raises it
                        raise
                    raise DaskError(f"lost the Dask scheduler at {where}: {one_line(exc, 300)}") from None
                now = time.monotonic()
                done = sum(f.done() for f in futures)
                if done > done_before:  # files further on finished: the cluster works
                    done_before, last_progress = done, now
                try:
                    workers = len(client.nthreads())
                except Exception as exc:
                    raise DaskError(f"lost the Dask scheduler at {where}: {one_line(exc, 300)}") from None
                no_workers_since = None if workers else (no_workers_since or now)
                if no_workers_since is not None and now - no_workers_since >= no_workers_s:
                    raise DaskError(
                        f"the Dask cluster at {where} has had no worker for {no_workers_s:g} s "
                        f"(every worker died, or none joined); {len(out)} of {len(files)} files read"
                    )
                if now - last_progress >= stall_s:
                    raise DaskError(
                        f"no file finished on the Dask cluster at {where} for {stall_s:g} s "
                        f"({workers} worker(s)); {len(out)} of {len(files)} files read"
                    )
            last_progress = time.monotonic()
            report(path)
        return out
    finally:
        if own:
            with contextlib.suppress(Exception):
                client.close(timeout=DASK_CONNECT_S)
        elif futures:
            with contextlib.suppress(Exception):
                client.cancel(futures)
