"""Reading traces and logs: ``dftune analyze`` and ``dftune diagnose``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    pass

from dftune.cli.common import (
    _bar,
    app,
    emit_json,
    fail,
    refuse_early,
    user_errors,
)


@app.command()
def analyze(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Trace files (.pfw, .pfw.gz), Darshan logs (.darshan) or directories (searched recursively)."
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document (schema dftune.analysis/1).")
    ] = False,
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Skip bad lines/files and report them instead of failing.")
    ] = False,
    view: Annotated[
        list[str] | None, typer.Option("--view", help="summary|file|proc|time|layer (repeatable).")
    ] = None,
    scheduler: Annotated[
        str | None, typer.Option("--scheduler", help="Dask scheduler address, e.g. tcp://host:8786.")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", min=1, max=1024, help="Local worker processes (default: cores)."),
    ] = None,
    windows: Annotated[
        int, typer.Option("--windows", min=1, max=10000, help="Windows in the time view (at most).")
    ] = 20,
    split_runs: Annotated[
        bool, typer.Option("--split-runs", help="Traces of several runs: analyze each run on its own.")
    ] = False,
    app_only: Annotated[
        bool, typer.Option("--app-only", help="Leave files holding only helper processes out of every total.")
    ] = False,
    system_paths: Annotated[
        bool, typer.Option("--include-system-paths", help="Keep /proc, /sys, /dev files in the file view.")
    ] = False,
) -> None:
    """Read dftracer traces or Darshan logs exactly and summarize their I/O (counts, bytes, time, pattern)."""
    from dftune.tools.session import preflight

    refuse_early(preflight.missing_input(paths))
    from functools import partial

    from dftune.tools.trace import analyze, analyze_runs
    from dftune.tools.trace.render import AnalysisRenderer
    from dftune.tools.trace.replicates import one_replicate
    from dftune.tools.trace.views import VIEWS

    run_analysis: Any = partial(
        analyze_runs if split_runs else analyze, exclude_helpers=app_only, include_system_paths=system_paths
    )

    views = view or ["summary"]
    for v in views:
        if v not in VIEWS:
            fail(f"--view {v!r} is not one of {', '.join(VIEWS)}")
    chosen = one_replicate(paths, "analyzing")
    if chosen.note:
        Console(stderr=True).print(chosen.note, highlight=False)
    with user_errors(), _bar("reading traces", as_json) as tick:
        result = run_analysis(
            chosen.paths,
            skip_bad=skip_bad,
            views=views,
            scheduler=scheduler,
            workers=workers,
            time_windows=windows,
            progress=tick,
        )
    if split_runs:
        if as_json:
            emit_json({"schema": "dftune.analysis.runs/1", "runs": [a.to_json_dict() for a in result]})
            return
        out = Console()
        for a in result:
            out.rule(_run_title(a.run))
            AnalysisRenderer(out).render(a, views)
        return
    if as_json:
        emit_json(result.to_json_dict())
        return
    AnalysisRenderer(Console()).render(result, views)


def _run_title(run: Any) -> str:
    if run is None:
        return "run"
    apart = f": {run.apart}" if run.apart else ""
    return (
        f"run {run.index} of {run.runs} "
        f"({', '.join(run.hosts) or 'unknown host'}, {run.span_s:,.3f} s{apart})"
    )


@app.command()
def diagnose(
    paths: Annotated[list[Path], typer.Argument(help="Trace files, Darshan logs or directories.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document (schema dftune.diagnosis/1).")
    ] = False,
    data_dir: Annotated[
        list[Path] | None,
        typer.Option("--data-dir", help="Dataset directory to check for its filesystem (repeatable)."),
    ] = None,
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Skip bad lines/files and report them.")
    ] = False,
    scheduler: Annotated[str | None, typer.Option("--scheduler", help="Dask scheduler address.")] = None,
    split_runs: Annotated[
        bool, typer.Option("--split-runs", help="Traces of several runs: diagnose each run on its own.")
    ] = False,
    system_paths: Annotated[
        bool, typer.Option("--include-system-paths", help="Judge /proc, /sys, /dev files too.")
    ] = False,
) -> None:
    """Name the I/O bottlenecks (rules as data), pick the metric, gate whether tuning pays off."""
    from dftune.tools.session import preflight

    refuse_early(preflight.missing_input(paths) or preflight.bad_data_dir(data_dir or []))
    from dftune.tools.diagnose.engine import diagnose as run_diagnosis
    from dftune.tools.diagnose.engine import diagnose_runs
    from dftune.tools.diagnose.render import DiagnosisRenderer
    from dftune.tools.trace.replicates import one_replicate

    chosen = one_replicate(paths, "diagnosing")
    if chosen.note:
        Console(stderr=True).print(chosen.note, highlight=False)
    paths = chosen.paths
    options: dict[str, Any] = {
        "data_dirs": data_dir or [],
        "skip_bad": skip_bad,
        "scheduler": scheduler,
        "include_system_paths": system_paths,
    }
    if split_runs:
        with user_errors():
            results = diagnose_runs(paths, **options)
        if as_json:
            emit_json({"schema": "dftune.diagnosis.runs/1", "runs": [d.to_json_dict() for d in results]})
            return
        out = Console()
        for d in results:
            out.rule(_run_title(d.run))
            DiagnosisRenderer(out).render(d)
        return
    with user_errors():
        result = run_diagnosis(paths, **options)
    if as_json:
        emit_json(result.to_json_dict())
        return
    DiagnosisRenderer(Console()).render(result)
