"""Analyze trace files: map each file to a partial, merge, add the requested views.

The map runs the native C scanner (:mod:`native`) in threads of this process (it
releases the GIL); files it declines run on DuckDB in local worker processes (measured:
DuckDB's Python binding gives no speed-up across threads here, processes do) or, with
``scheduler``, everything runs on a Dask distributed cluster.  Both run the
same :func:`reader.read_file` and the same :func:`merge.merge`, so results are identical.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from dftune.core.errors import DftuneError, one_line
from dftune.tools.trace import native
from dftune.tools.trace.discover import discover
from dftune.tools.trace.merge import merge
from dftune.tools.trace.model import Analysis, SkippedLine
from dftune.tools.trace.profile import build_profile
from dftune.tools.trace.reader import FilePartial, ReadOptions, read_file, read_file_native
from dftune.tools.trace.views import VIEWS, build_view

#: Called after each file is read: (files done, files total, path).
Progress = Callable[[int, int, str], None]
DEFAULT_TIME_WINDOWS = 20
#: Below this much trace data, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 8 << 20


def analyze(
    paths: Iterable[str | Path],
    *,
    skip_bad: bool = False,
    views: Sequence[str] = (),
    scheduler: str | None = None,
    workers: int | None = None,
    time_windows: int = DEFAULT_TIME_WINDOWS,
    progress: Progress | None = None,
    profile: bool = False,
) -> Analysis:
    """Analyze dftracer traces or Darshan logs (files or directories) into one :class:`Analysis`.

    ``profile``: also build the per-file access profile (byte ranges, calls, sizes, the
    application's own events) that the guards and the estimates compare; it is read on the
    DuckDB path, which keeps per-access rows (the traces of tuning runs are small)."""
    unknown = [v for v in views if v not in VIEWS]
    if unknown:
        raise ValueError(f"unknown view {unknown[0]!r}; choose from {', '.join(VIEWS)}")
    from dftune.tools.trace.darshan.detect import split_inputs

    paths = list(paths)
    logs, is_darshan = split_inputs(paths)  # Darshan logs, recognised by content
    if is_darshan:
        from dftune.tools.trace.darshan.engine import analyze_logs

        return analyze_logs(
            logs, skip_bad=skip_bad, views=views, time_windows=time_windows, progress=progress
        )
    unreadable: list[tuple[str, str]] | None = [] if skip_bad else None
    files = discover(paths, unreadable)
    options = ReadOptions(skip_bad=skip_bad, file_view="file" in views or profile, profile=profile)
    partials = _map(files, options, scheduler, workers, progress)
    analysis = merge(partials)
    for path, why in unreadable or []:  # links that cannot be read: named, never silently ignored
        analysis.skipped.append(SkippedLine(file=path, line=None, reason=why))
        analysis.warnings.append(f"{path}: {why} (skipped)")
    if "time" in views and analysis.events:
        partials = _with_time_bins(files, options, partials, time_windows, scheduler, workers)
    for view in views:
        if view != "summary":
            analysis.views[view] = build_view(view, partials, analysis)
    if profile:
        analysis.profile = build_profile(partials)
    return analysis


def _with_time_bins(
    files: list[Path],
    options: ReadOptions,
    partials: list[FilePartial],
    windows: int,
    scheduler: str | None,
    workers: int | None,
) -> list[FilePartial]:
    """Second pass for the time view: windows need the global start and end first."""
    firsts = [p.scalars["first_ts"] for p in partials if p.scalars.get("first_ts") is not None]
    lasts = [p.scalars["last_end"] for p in partials if p.scalars.get("last_end") is not None]
    origin, end = min(firsts), max(lasts)
    width = max(1, -(-(end - origin) // windows))
    binned = ReadOptions(
        skip_bad=options.skip_bad,
        file_view=options.file_view,
        time_bins=(origin, width, windows),
        profile=options.profile,
    )
    return _map(files, binned, scheduler, workers, None)


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
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        raise DaskError(f"{name}={os.environ[name]!r} is not a number of seconds") from None
    return value if value > 0 else default


def _map_dask(
    files: list[Path], options: ReadOptions, scheduler: Any, progress: Progress | None
) -> list[FilePartial]:
    """Read every file on a Dask cluster; never hang on a cluster that cannot answer.

    A scheduler that does not answer within ``DASK_CONNECT_S`` is reported unreachable (not
    as a bad input file); a cluster left without workers, a map that makes no progress, or
    a file whose reading kills worker after worker (``KilledWorker``) ends the analysis with
    a one-line :class:`DaskError`.  Errors of the reader itself (a bad trace) pass through.
    """
    try:
        from distributed import Client, KilledWorker
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise DaskError("--scheduler needs dask distributed: pip install 'dftune[dask]'") from exc
    no_workers_s = _limit("DFTUNE_DASK_NO_WORKERS_S", DASK_NO_WORKERS_S)
    stall_s = _limit("DFTUNE_DASK_STALL_S", DASK_STALL_S)
    own = isinstance(scheduler, str)
    where = (
        scheduler if own else getattr(getattr(scheduler, "scheduler", None), "address", "the Dask cluster")
    )
    if own:
        try:
            client: Any = Client(scheduler, timeout=_limit("DFTUNE_DASK_CONNECT_S", DASK_CONNECT_S))
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
                    raise DaskError(f"{path}: a Dask worker died every time it read this file (KilledWorker: "
                                    f"{one_line(exc, 200)}); see the workers' logs") from None  # fmt: skip
                except TimeoutError:
                    pass
                except Exception as exc:
                    if fut.status == "error":
                        raise  # the reader's own failure (a bad trace, a missing file), as a local run raises it
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
                    raise DaskError(f"the Dask cluster at {where} has had no worker for {no_workers_s:g} s "
                                    f"(every worker died, or none joined); {len(out)} of {len(files)} files read")  # fmt: skip
                if now - last_progress >= stall_s:
                    raise DaskError(f"no file finished on the Dask cluster at {where} for {stall_s:g} s "
                                    f"({workers} worker(s)); {len(out)} of {len(files)} files read")  # fmt: skip
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
