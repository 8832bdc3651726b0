"""Analyze trace files: map each file to a partial, merge, add the requested views.

The map runs the native C scanner (:mod:`native`) in threads of this process (it
releases the GIL); files it declines run on DuckDB in local worker processes (measured:
DuckDB's Python binding gives no speed-up across threads here, processes do) or, with
``scheduler``, everything runs on a Dask distributed cluster.  Both run the
same :func:`reader.read_file` and the same :func:`merge.merge`, so results are identical.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from dftune.tools.trace import native
from dftune.tools.trace.discover import discover
from dftune.tools.trace.merge import merge
from dftune.tools.trace.model import Analysis
from dftune.tools.trace.reader import FilePartial, ReadOptions, read_file, read_file_native
from dftune.tools.trace.views import VIEWS, build_view, fine_bins

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
) -> Analysis:
    """Analyze dftracer traces (files or directories) into one :class:`Analysis`."""
    unknown = [v for v in views if v not in VIEWS]
    if unknown:
        raise ValueError(f"unknown view {unknown[0]!r}; choose from {', '.join(VIEWS)}")
    files = discover(paths)
    # every view comes from this one pass: the time view's fine bins need no global start or end
    options = ReadOptions(
        skip_bad=skip_bad,
        file_view="file" in views,
        time_bins=fine_bins(time_windows) if "time" in views else None,
    )
    partials = _map(files, options, scheduler, workers, progress)
    analysis = merge(partials)
    for view in views:
        if view != "summary":
            analysis.views[view] = build_view(view, partials, analysis, time_windows=time_windows)
    return analysis


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


def _map_dask(
    files: list[Path], options: ReadOptions, scheduler: str, progress: Progress | None
) -> list[FilePartial]:
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError("--scheduler needs dask distributed: pip install 'dftune[dask]'") from exc
    client: Any = Client(scheduler) if isinstance(scheduler, str) else scheduler
    try:
        futures = client.map(read_file, [str(f) for f in files], options=options, pure=False)
        return _gather((fut.result() for fut in futures), files, _Reporter(len(files), progress))
    finally:
        if isinstance(scheduler, str):
            client.close()
