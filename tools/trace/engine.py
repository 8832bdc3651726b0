"""Analyze trace files: map each file to a partial, merge, add the requested views.

The map runs in local worker processes (measured: DuckDB's Python binding gives no
speed-up across threads here, processes do) or, with ``scheduler``, on a Dask
distributed cluster.  Both run the
same :func:`reader.read_file` and the same :func:`merge.merge`, so results are identical.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from dftune.tools.trace.discover import discover
from dftune.tools.trace.merge import merge
from dftune.tools.trace.model import Analysis
from dftune.tools.trace.reader import FilePartial, ReadOptions, read_file
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
) -> Analysis:
    """Analyze dftracer traces (files or directories) into one :class:`Analysis`."""
    unknown = [v for v in views if v not in VIEWS]
    if unknown:
        raise ValueError(f"unknown view {unknown[0]!r}; choose from {', '.join(VIEWS)}")
    files = discover(paths)
    options = ReadOptions(skip_bad=skip_bad, file_view="file" in views)
    partials = _map(files, options, scheduler, workers, progress)
    analysis = merge(partials)
    if "time" in views and analysis.events:
        partials = _with_time_bins(files, options, partials, time_windows, scheduler, workers)
    for view in views:
        if view != "summary":
            analysis.views[view] = build_view(view, partials, analysis)
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
        skip_bad=options.skip_bad, file_view=options.file_view, time_bins=(origin, width, windows)
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
    total = sum(f.stat().st_size for f in files)
    if n <= 1 or len(files) == 1 or (workers is None and total < PARALLEL_MIN_BYTES):
        return _gather((read_file(f, options) for f in files), files, progress)
    # spawn, not fork: the parent may already hold DuckDB threads.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
        futures = [pool.submit(read_file, str(f), options) for f in files]
        return _gather((fut.result() for fut in futures), files, progress)


def _gather(
    results: Iterator[FilePartial], files: list[Path], progress: Progress | None
) -> list[FilePartial]:
    """Collect per-file partials in file order, reporting progress as each one arrives."""
    out: list[FilePartial] = []
    for i, partial in enumerate(results, 1):
        out.append(partial)
        if progress:
            progress(i, len(files), str(files[i - 1]))
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
        return _gather((fut.result() for fut in futures), files, progress)
    finally:
        if isinstance(scheduler, str):
            client.close()
