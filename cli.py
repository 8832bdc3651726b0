"""The ``dftune`` command line.  Thin: parse options, call tools, hand results to renderers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

if TYPE_CHECKING:
    from dftune.agents.state import RunSettings

app = typer.Typer(
    name="dftune",
    help="Find the I/O bottleneck in dftracer traces and tune it, with cited, verified changes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Exit code for bad input (a trace, a path, an option); 1 is left for unexpected failures.
EXIT_BAD_INPUT = 2
#: ``dftune run`` ended with status failed (baseline could not run, tracer unusable, ...)
EXIT_RUN_FAILED = 3


@app.callback()
def _root() -> None:
    """dftune: autonomous, auditable I/O tuning for workloads traced with dftracer."""


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line on stderr, non-zero exit: the contract for
    every error (data in it cannot drive the terminal)."""
    from dftune.core.safetext import one_line_text

    for printer in _printers:  # a progress line counting in place ends before the error
        printer.clear()
    sys.stderr.write(f"dftune: error: {one_line_text(message)}\n")
    raise typer.Exit(code)


def emit_json(doc: object) -> None:
    """``--json``: one document on stdout and nothing else there (strict JSON: no NaN/Infinity)."""
    from dftune.core import strictjson

    sys.stdout.write(strictjson.dumps(doc, indent=2) + "\n")


@contextmanager
def _bar(label: str, quiet: bool) -> Iterator[Any]:
    """A Rich progress bar on stderr fed by ``tick(done,
    total, what)``; nothing with --json or off a terminal."""
    err = Console(stderr=True)
    if quiet or not err.is_terminal:
        yield None
        return
    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def tick(done: int, total: int, what: Any) -> None:
            bar.update(task, completed=done, total=total, description=str(getattr(what, "status", what))[:40])

        yield tick


def refuse_early(message: str | None) -> None:
    """Refuse a missing path or run id before the command imports its engine (one line, fast)."""
    if message:
        fail(message)


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """``--set NAME=VALUE`` options as a dict (one-line error on a malformed one)."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            fail(f"--set {item!r}: expected NAME=VALUE")
        out[name] = value
    return out


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the errors a user can fix (every :class:`DftuneError`, and files that cannot be read)
    into :func:`fail`: one line, exit code 2."""
    from dftune.core.errors import DftuneError, one_line

    try:
        yield
    except DftuneError as exc:
        fail(one_line(exc), getattr(exc, "exit_code", EXIT_BAD_INPUT))
    except OSError as exc:
        fail(f"{getattr(exc, 'filename', '') or 'input'}: {exc.strerror or exc}")


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
        int | None, typer.Option("--workers", min=1, help="Local worker processes (default: cores).")
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
    from dftune.tools.trace.views import VIEWS

    run_analysis: Any = partial(
        analyze_runs if split_runs else analyze, exclude_helpers=app_only, include_system_paths=system_paths
    )

    views = view or ["summary"]
    for v in views:
        if v not in VIEWS:
            fail(f"--view {v!r} is not one of {', '.join(VIEWS)}")
    err = Console(stderr=True)
    show_progress = not as_json and err.is_terminal
    with user_errors():
        if show_progress:
            with Progress(
                TextColumn("reading traces"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            ) as bar:
                task = bar.add_task("read", total=None)

                def tick(done: int, total: int, _path: str) -> None:
                    bar.update(task, completed=done, total=total)

                result = run_analysis(
                    paths,
                    skip_bad=skip_bad,
                    views=views,
                    scheduler=scheduler,
                    workers=workers,
                    time_windows=windows,
                    progress=tick,
                )
        else:
            result = run_analysis(
                paths,
                skip_bad=skip_bad,
                views=views,
                scheduler=scheduler,
                workers=workers,
                time_windows=windows,
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

    if split_runs:
        with user_errors():
            results = diagnose_runs(
                paths,
                data_dirs=data_dir or [],
                skip_bad=skip_bad,
                scheduler=scheduler,
                include_system_paths=system_paths,
            )
        if as_json:
            emit_json({"schema": "dftune.diagnosis.runs/1", "runs": [d.to_json_dict() for d in results]})
            return
        out = Console()
        for d in results:
            out.rule(_run_title(d.run))
            DiagnosisRenderer(out).render(d)
        return
    with user_errors():
        result = run_diagnosis(
            paths,
            data_dirs=data_dir or [],
            skip_bad=skip_bad,
            scheduler=scheduler,
            include_system_paths=system_paths,
        )
    if as_json:
        emit_json(result.to_json_dict())
        return
    DiagnosisRenderer(Console()).render(result)


@app.command()
def bench(
    workload: Annotated[Path, typer.Argument(help="Workload spec (TOML).")],
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Knob value NAME=VALUE (repeatable).")
    ] = None,
    replicates: Annotated[
        int | None, typer.Option("--replicates", min=1, help="Runs (default: the spec's).")
    ] = None,
    trace: Annotated[
        bool | None,
        typer.Option("--trace/--no-trace", help="Trace with dftracer (default: the spec's tracing mode)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document (schema dftune.bench/1).")
    ] = False,
) -> None:
    """Run a workload's replicates (one condition) and report median, p95 and a 95% CI."""
    from dftune.tools.session import preflight

    refuse_early(preflight.missing_spec([workload]))
    from dftune.tools.runner.bench import bench as run_bench
    from dftune.tools.runner.spec import load_spec

    overrides = parse_sets(set_)
    err = Console(stderr=True)

    from dftune.core.terminal import text

    def show(done: int, total: int, rep: Any) -> None:
        metric = f" metric {rep.metric:g}" if rep.metric is not None else ""
        why = f": {rep.reason}" if rep.status != "ok" and rep.reason else ""
        err.print(
            text(
                f"replicate {done}/{total}: {rep.status} {rep.wall_s:.3f} s{metric}{why}",
                "" if rep.status == "ok" else "yellow",
            )
        )

    from dftune.core.supervise import DriverInterrupted, supervised

    with user_errors():
        spec = load_spec(workload)
        try:
            with supervised("bench"):  # SIGTERM/SIGINT kill the workload's group, then we stop
                result = run_bench(
                    spec,
                    overrides=overrides,
                    replicates=replicates,
                    trace=trace,
                    progress=None if as_json else show,
                )
        except DriverInterrupted as exc:
            fail(f"bench {spec.name} {exc}: its workload was killed", 128 + exc.signum)
    if as_json:
        emit_json(result.to_json_dict())
    else:
        out = Console()
        out.print(
            text(
                f"{result.workload} {result.settings} traced={result.traced} "
                f"({result.ok}/{len(result.replicates)} ok)",
                "bold",
            )
        )
        if result.median is not None:
            ci = f", 95% CI of the median [{result.ci95[0]:.4g}, {result.ci95[1]:.4g}]" if result.ci95 else ""
            out.print(text(f"median {result.median:.4g}, p95 {result.p95:.4g}{ci}"))
        for rep in result.replicates:
            if rep.status != "ok":
                out.print(
                    text(
                        f"replicate r{rep.index} {rep.status}: {rep.reason or 'no reason recorded'}", "yellow"
                    )
                )
        for note in result.notes:
            out.print(text(note, "dim"))
        if result.stopped_reason:
            out.print(text(result.stopped_reason, "yellow"))
        if result.trace_dir:
            out.print(text(f"traces: {result.trace_dir}"), soft_wrap=True)
    if result.ok == 0:
        reasons = (
            "; ".join(dict.fromkeys(f"{r.status}: {r.reason}" for r in result.replicates))
            or "no replicate ran"
        )
        fail(f"no replicate of {result.workload} succeeded ({reasons})", code=EXIT_RUN_FAILED)


def _progress(as_json: bool) -> Any:
    """Progress lines on stderr (Rich), silent with --json."""
    from dftune.agents.context import silent

    if as_json:
        return silent
    from dftune.tools.report.progress_console import ProgressPrinter

    _printers.append(ProgressPrinter(Console(stderr=True)))
    return _printers[-1]


#: the progress printers of this command: their moving line is cleared before the result prints
_printers: list[Any] = []


def _show_run(result: dict[str, Any], as_json: bool, table: bool = False) -> None:
    for printer in _printers:
        printer.clear()
    if as_json:
        emit_json(result)
        return
    from dftune.tools.report.console import RunRenderer

    RunRenderer(Console()).render(result, table=table)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (schema dftune.run/1).")]
TableOpt = Annotated[
    bool, typer.Option("--table", help="Also print the full proposal table, every experiment and refusal.")
]


BudgetOpt = Annotated[
    str | None,
    typer.Option(
        "--time-budget", help="Wall-clock budget, e.g. 90s, 4m, 8h, 1h30m: nothing starts that cannot finish."
    ),
]
DeadlineOpt = Annotated[
    str | None, typer.Option("--deadline", help="Finish (reports written) by this local time, e.g. 06:30.")
]


@app.command()
def run(
    workloads: Annotated[
        list[Path],
        typer.Argument(
            help="Workload spec(s) (TOML). Several specs, or one campaign TOML, make one campaign."
        ),
    ],
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="autonomous (default; overnight: no-sudo L1/L2 changes approved by policy) "
            "or interactive (every change waits for dftune approve).",
        ),
    ] = None,
    max_experiments: Annotated[
        int | None,
        typer.Option("--max-experiments", min=0, help="Experiment budget per workload (default 6)."),
    ] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Run (or campaign) id (default: generated).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="rules (default; offline, deterministic) or PROVIDER:MODEL "
            "(anthropic:..., openai:...; OPENAI_BASE_URL for compatible servers).",
        ),
    ] = None,
    replicates: Annotated[
        int | None, typer.Option("--replicates", min=1, help="Replicates per arm (default: the spec's).")
    ] = None,
    allow_install: Annotated[
        bool, typer.Option("--allow-install", help="Let the installer pip-install dftracer if it is missing.")
    ] = False,
    token_budget: Annotated[
        int | None,
        typer.Option("--token-budget", min=0, help="Tokens the chat model may spend; then the rules decide."),
    ] = None,
    retry_known: Annotated[
        bool,
        typer.Option(
            "--retry-known",
            help="Measure again what the knowledge base already measured here "
            "without a gain (against the same incumbent).",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Tune even when the worth-tuning gate says I/O cannot pay off here."),
    ] = False,
    llm_timeout: Annotated[
        float | None,
        typer.Option(
            "--llm-timeout",
            envvar="DFTUNE_LLM_TIMEOUT_S",
            show_default="30",
            help="Seconds one request to the chat model may take.",
        ),
    ] = None,
    llm_retries: Annotated[
        int | None,
        typer.Option(
            "--llm-retries",
            envvar="DFTUNE_LLM_RETRIES",
            show_default="2",
            help="Retries of a failed request (429, 5xx, timeouts), with backoff and retry-after.",
        ),
    ] = None,
    llm_deadline: Annotated[
        float | None,
        typer.Option(
            "--llm-deadline",
            envvar="DFTUNE_LLM_DEADLINE_S",
            show_default="60",
            help="Seconds one judgment may take in all (retries, re-asks); then the rules decide.",
        ),
    ] = None,
    time_budget: BudgetOpt = None,
    deadline: DeadlineOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document (dftune.run/1, or dftune.campaign/1).")
    ] = False,
    table: TableOpt = False,
) -> None:
    """Tune workloads: baseline, diagnosis, cited proposals, one guarded experiment at a time, report.

    One spec is one run; several specs (or a campaign TOML) are one campaign under one deadline."""
    from dftune.tools.session import preflight

    refuse_early(preflight.missing_spec(workloads))
    from dftune.agents.reasoner import llm_settings
    from dftune.graphs.campaign import CampaignFile, is_campaign_file, load_campaign_file, start_campaign
    from dftune.graphs.runs import run_settings_of
    from dftune.tools.runner.deadline import resolve

    with user_errors():
        llm = llm_settings(timeout_s=llm_timeout, retries=llm_retries, deadline_s=llm_deadline)
        file: CampaignFile | None = None
        specs = list(workloads)
        if len(specs) == 1 and is_campaign_file(specs[0]):
            file, specs = load_campaign_file(specs[0])
        budget_text = time_budget or (file.time_budget if file and not deadline else None)
        until = resolve(budget_text, deadline or (file.deadline if file and not time_budget else None))
        # the command line wins over the campaign file, which wins over RunSettings' defaults
        cli_settings = {
            "mode": mode,
            "max_experiments": max_experiments,
            "model": model,
            "replicates": replicates,
            "token_budget": token_budget,
            "allow_install": allow_install or None,
            "retry_known": retry_known or None,
            "force": force or None,
            "llm": llm,
        }
        settings = run_settings_of(file, {k: v for k, v in cli_settings.items() if v is not None})
        if file is None and len(specs) == 1:
            result = _single_run(specs[0], settings, run_id, until, as_json)
        else:
            result = start_campaign(
                specs,
                deadline=until,
                budget_text=budget_text or "",
                campaign_id=run_id,
                name=file.name if file else "campaign",
                progress=_progress(as_json),
                settings=settings,
            )
    if "campaign_id" in result:
        _show_campaign(result, as_json)
        if all(m["status"] == "failed" for m in result["members"]):
            raise typer.Exit(EXIT_RUN_FAILED)
        return
    _show_run(result, as_json, table)
    if result["status"] == "failed":
        raise typer.Exit(EXIT_RUN_FAILED)


def _single_run(
    spec: Path, settings: RunSettings, run_id: str | None, until: float | None, as_json: bool
) -> dict[str, Any]:
    from dftune.agents.budget import Budget
    from dftune.graphs.campaign import RUN_RESERVE_S
    from dftune.graphs.runs import start_run
    from dftune.tools.runner.deadline import Deadline

    budget = Budget(deadline=Deadline(until, reserve_s=RUN_RESERVE_S)) if until is not None else None
    return start_run(spec, settings=settings, run_id=run_id, progress=_progress(as_json), budget=budget)


def _show_campaign(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(result)
        return
    from dftune.tools.report.campaign_console import CampaignRenderer

    CampaignRenderer(Console()).render(result)


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="Run id or campaign id.")],
    time_budget: BudgetOpt = None,
    deadline: DeadlineOpt = None,
    as_json: JsonOpt = False,
    table: TableOpt = False,
) -> None:
    """Continue a run or a campaign after a crash, a kill or its deadline, from its last saved state."""
    from dftune.tools.session import preflight

    refuse_early(preflight.unknown_run(run_id, checkpoints=True))
    from dftune.graphs.campaign import RUN_RESERVE_S, is_campaign, resume_campaign
    from dftune.graphs.runs import resume_run
    from dftune.tools.runner.deadline import Deadline, resolve

    with user_errors():
        until = resolve(time_budget, deadline)
        if is_campaign(run_id):
            result = resume_campaign(run_id, deadline=until, progress=_progress(as_json))
            _show_campaign(result, as_json)
            return
        from dftune.agents.budget import Budget

        budget = Budget(deadline=Deadline(until, reserve_s=RUN_RESERVE_S)) if until is not None else None
        result = resume_run(run_id, progress=_progress(as_json), budget=budget)
    _show_run(result, as_json, table)


@app.command()
def approve(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    reject: Annotated[bool, typer.Option("--reject", help="Refuse the pending change instead.")] = False,
    reason: Annotated[str, typer.Option("--reason", help="Why (kept in the run's record).")] = "",
    as_json: JsonOpt = False,
    table: TableOpt = False,
) -> None:
    """Answer the first thing a run waits for (an approval, else the oldest change kept on trial), and let it
    continue; also after the run finished."""
    from dftune.tools.session import preflight

    refuse_early(preflight.unknown_run(run_id, campaigns=False, checkpoints=True))
    from dftune.graphs.runs import approve_run

    with user_errors():
        result = approve_run(run_id, reject=reject, reason=reason, progress=_progress(as_json))
    _show_run(result, as_json, table)


@app.command("history")
def history_cmd(
    run_id: Annotated[str, typer.Argument(help="Run id or campaign id.")], as_json: JsonOpt = False
) -> None:
    """The run's saved graph states (checkpoints), oldest first; a campaign's events."""
    from dftune.tools.session import preflight

    refuse_early(preflight.unknown_run(run_id, checkpoints=True))
    from dftune.graphs.campaign import campaign_history, is_campaign
    from dftune.graphs.runs import history

    if is_campaign(run_id):
        with user_errors():
            events = campaign_history(run_id)
        if as_json:
            emit_json({"schema": "dftune.campaign.history/1", "campaign_id": run_id, "events": events})
            return
        from dftune.tools.report.campaign_console import CampaignRenderer

        CampaignRenderer(Console()).render_history(events)
        return
    with user_errors():
        rows = history(run_id)
    if as_json:
        emit_json({"schema": "dftune.history/1", "run_id": run_id, "checkpoints": rows})
        return
    from dftune.tools.report.console import RunRenderer

    RunRenderer(Console()).render_history(rows)


@app.command()
def replay(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    checkpoint: Annotated[
        str, typer.Option("--checkpoint", help="Checkpoint id, or the step number dftune history shows.")
    ],
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Change an input before forking: FIELD=VALUE (repeatable)."),
    ] = None,
    as_json: JsonOpt = False,
    table: TableOpt = False,
) -> None:
    """Fork the run from a saved state (optionally with changed inputs) and run the fork."""
    from dftune.tools.session import preflight

    refuse_early(preflight.unknown_run(run_id, campaigns=False, checkpoints=True))
    from dftune.graphs.runs import replay_run
    from dftune.graphs.steps import resolve_checkpoint

    sets = parse_sets(set_)
    with user_errors():
        result = replay_run(run_id, resolve_checkpoint(run_id, checkpoint), sets, progress=_progress(as_json))
    _show_run(result, as_json, table)


@app.command()
def report(
    run_id: Annotated[
        str, typer.Argument(help="Run id (see dftune runs), or a Darshan log / trace file or folder.")
    ],
    html: Annotated[
        bool, typer.Option("--html", help="Also write a self-contained report.html (plots embedded).")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", help="For a log or trace: where to write the HTML (default ./NAME_report.html)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document with the paths.")] = False,
    table: Annotated[bool, typer.Option("--table", help="Also print the run's full proposal table.")] = False,
) -> None:
    """Write a finished run's (or campaign's) report.md (and report.html with --html), or the HTML
    report of one Darshan log or trace (analysis, diagnosis, plots); print its first screen."""
    from dftune.tools.session import preflight

    if not Path(run_id).exists():
        refuse_early(preflight.unknown_run(run_id))
    from dftune.core.terminal import text
    from dftune.graphs.campaign import campaign_reports, is_campaign
    from dftune.tools.report.writer import load_report, write_reports

    source = Path(run_id).exists()  # a log or trace, not a run id
    campaign = not source and is_campaign(run_id)
    with user_errors():
        if campaign:
            paths = campaign_reports(run_id, html=html)
        elif source:  # its analysis report (always HTML)
            from dftune.tools.report.analysis_report import write_input_report

            paths = write_input_report(run_id, output)
        else:
            paths = write_reports(run_id, html=html)
    if as_json:
        emit_json(
            {
                "schema": "dftune.report/1",
                "run_id": run_id,
                "kind": "input" if source else ("campaign" if campaign else "run"),
                **paths,
            }
        )
        return
    out = Console()
    if not campaign and not source:
        from dftune.tools.report.console import RunRenderer
        from dftune.tools.report.sections import headline

        with user_errors():
            _, doc = load_report(run_id)
        RunRenderer(out).render_glance(headline(doc))
        if table:
            RunRenderer(out).render_table(doc.get("proposal_table") or [])
    for kind, path in paths.items():
        out.print(text(f"{kind}: {path}"), soft_wrap=True)


@app.command()
def compare(
    a: Annotated[str, typer.Argument(help="A: a trace file/folder, or a run id.")],
    b: Annotated[str, typer.Argument(help="B: a trace file/folder, or a run id (same kind as A).")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document (schema dftune.compare/1).")
    ] = False,
) -> None:
    """Two traces or two runs side by side, with the change from A to B."""
    from dftune.tools.report.compare import compare as run_compare

    with user_errors():
        doc = run_compare(a, b)
    if as_json:
        emit_json(doc)
        return
    from dftune.tools.report.console import CompareRenderer

    CompareRenderer(Console()).render(doc)


@app.command()
def doctor(
    data_dir: Annotated[
        list[Path] | None,
        typer.Option("--data-dir", help="Report the filesystem of this folder (repeatable)."),
    ] = None,
    allow_install: Annotated[
        bool, typer.Option("--allow-install", help="pip-install dftracer if it is missing.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document (schema dftune.doctor/1).")
    ] = False,
) -> None:
    """Is dftracer usable here, what does it trace and not
    trace, are MPI/HDF5 present, which FS holds the data."""
    from dftune.agents.doctor import doctor as run_doctor

    with user_errors():
        report = run_doctor(data_dir, allow_install=allow_install)
    if as_json:
        emit_json(report)
    else:
        from rich.text import Text

        from dftune.core.terminal import text

        out = Console()
        t = report["tracer"]
        mark = (
            Text("usable", style="green")
            if t.get("usable")
            else Text("not usable", style="red") + text(f": {t.get('reason')}")
        )
        out.print(text(f"dftracer {report['software']['dftracer'] or '(not installed)'}: ") + mark)
        if t.get("preload_library"):
            out.print(text(f"  preload library: {t['preload_library']}"), soft_wrap=True)
        if t.get("smoke_calls_traced"):
            out.print(text("  traced by the smoke program: " + ", ".join(sorted(t["smoke_calls_traced"]))))
        for p in report["pitfalls"]:
            out.print(Text("  blind spot", style="yellow") + text(f": {p['message']}"))
        for name, version in report["software"].items():
            if name not in ("dftracer", "mpirun"):  # the launcher has its own line below
                out.print(
                    text(f"{name}: ") + (text(version) if version else Text("not found", style="dim")),
                    soft_wrap=True,
                )
        launcher = report.get("mpi_launcher") or {}
        if launcher:
            out.print(
                text(
                    f"MPI launcher the runner uses: {launcher.get('path') or 'none found'}"
                    + (f" ({launcher['where']})" if launcher.get("where") else "")
                ),
                soft_wrap=True,
            )
        for fs in report["filesystems"]:
            line = text(f"{fs['path']}: {fs['fs_type']} (mount {fs['mount_point']})")
            if fs.get("warning"):
                line += Text(" ") + text(fs["warning"], "yellow")
            out.print(line, soft_wrap=True)
    if not report["ok"]:
        raise typer.Exit(1)


@app.command()
def runs(as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False) -> None:
    """Every run (and campaign) under $DFTUNE_HOME with its status."""
    from dftune.graphs.campaign import list_campaigns
    from dftune.tools.report.run_glance import run_result
    from dftune.tools.session.workspace import Workspace

    with user_errors():
        rows = [{**r.model_dump(mode="json"), "result": run_result(r.path)} for r in Workspace().list_runs()]
        campaigns = list_campaigns()
    if as_json:
        emit_json({"schema": "dftune.runs/1", "runs": rows, "campaigns": campaigns})
        return
    from dftune.tools.report.console import RunRenderer

    RunRenderer(Console()).render_runs(rows, campaigns)


@app.command("mcp")
def mcp_cmd() -> None:
    """Serve dftune's tools to MCP clients (Claude Code, Codex, ...) over stdio."""
    from dftune.mcp_server import serve

    with user_errors():
        serve()


kb_app = typer.Typer(
    help="The optimization knowledge base: measured, guarded findings from earlier runs.",
    no_args_is_help=True,
)
app.add_typer(kb_app, name="kb")


@kb_app.command("lookup")
def kb_lookup(
    system: Annotated[
        str | None, typer.Option("--system", help="System (L3 findings stay on their machine).")
    ] = None,
    workload: Annotated[
        str | None, typer.Option("--workload", help="Workload (L1 findings stay with it).")
    ] = None,
    software: Annotated[
        str | None, typer.Option("--software", help="Software, e.g. hdf5,mpi-io,lustre.")
    ] = None,
    strategy: Annotated[str | None, typer.Option("--strategy", help="Only this strategy id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Findings that apply here, partitioned by scope (system / software / workload)."""
    from dftune.tools.kb import opt_kb_lookup

    with user_errors():
        found = opt_kb_lookup(system=system, workload=workload, software=software, strategy=strategy)
    if as_json:
        emit_json(found.model_dump(mode="json"))
        return
    from dftune.core.terminal import text
    from dftune.tools.report.kb_lines import finding_line

    out = Console()
    for title, rows in (
        ("system (L3)", found.system_findings),
        ("software (L2)", found.software_findings),
        ("workload (L1)", found.workload_findings),
    ):
        out.print(text(f"{title}: {len(rows)} finding(s)", "bold"))
        for r in rows:
            out.print(text(f"  {finding_line(r)}"))
            if r.verdict == "pending":
                out.print(
                    text(f"    waits for a person's confirmation: dftune approve {r.run_id} [--reject]")
                )


@kb_app.command("render")
def kb_render(
    path: Annotated[
        Path | None, typer.Option("--path", help="Where to write (default $DFTUNE_HOME/kb/opt_kb.md).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Publish the knowledge base as a markdown skill file."""
    from dftune.tools.kb import opt_kb_render

    with user_errors():
        written = opt_kb_render(path)
    if as_json:
        emit_json({"path": str(written)})
    else:
        from dftune.core.terminal import text

        Console().print(text(f"knowledge base written to {written}"), soft_wrap=True)


@kb_app.command("restore")
def kb_restore(
    source: Annotated[
        Path | None, typer.Option("--from", help="A KB file to restore (default: the newest good backup).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Put a good copy of the knowledge base back (the current file is moved aside, never deleted)."""
    from dftune.tools.kb.backup import restore_kb

    with user_errors():
        doc = restore_kb(source)
    if as_json:
        emit_json(doc)
        return
    out = Console(highlight=False)
    out.print(
        Text(f"knowledge base {doc['kb']} restored from {doc['restored_from']} ({doc['records']} records)")
    )
    for aside in doc["moved_aside"]:
        out.print(Text(f"the previous file was kept as {aside}"))


papers_app = typer.Typer(
    help="The local paper corpus: ingest PDFs, search papers (offline first).", no_args_is_help=True
)
app.add_typer(papers_app, name="papers")


@papers_app.command("ingest")
def papers_ingest(
    directory: Annotated[Path, typer.Argument(help="Folder of PDFs (searched recursively).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds allowed to parse one PDF.")
    ] = 60.0,
    memory_mb: Annotated[
        int, typer.Option("--memory-mb", min=64, help="Memory limit of the PDF parser.")
    ] = 1024,
) -> None:
    """Add the PDFs of a folder to the corpus; broken or hostile files are named and skipped."""
    from dftune.tools.literature.corpus import open_store
    from dftune.tools.literature.remote import metadata_lookup
    from dftune.vectorstore.ingest import IngestLimits, ingest_dir

    if not directory.is_dir():
        fail(f"{directory}: not a directory")
    with user_errors(), _bar("ingesting PDFs", as_json) as tick:
        report = ingest_dir(
            directory,
            open_store(),
            limits=IngestLimits(timeout_s=timeout, memory_mb=memory_mb),
            lookup=metadata_lookup,
            progress=tick,
        )
    if as_json:
        emit_json(report.to_json())
        return
    from rich.text import Text

    from dftune.core.terminal import text

    out = Console()
    for f in report.files:
        if f.status == "skipped":
            out.print(Text("skipped ", style="red") + text(f"{f.file}: {f.reason}"), highlight=False)
        else:
            missing = f" (missing: {', '.join(f.missing)})" if f.missing else ""
            out.print(
                text(f"{f.status} {f.file}: {f.title or '(no title)'}, {f.passages} passage(s){missing}"),
                highlight=False,
            )
    out.print(text(f"{len(report.ingested)} ingested, {len(report.skipped)} skipped"))


@papers_app.command("search")
def papers_search(
    query: Annotated[str, typer.Argument(help="What to look for, e.g. 'many small reads on lustre'.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    k: Annotated[int, typer.Option("-k", "--k", min=1, max=50, help="How many papers.")] = 5,
    bottleneck: Annotated[
        str | None, typer.Option("--bottleneck", help="Bottleneck category (adds its vocabulary).")
    ] = None,
    online: Annotated[
        bool, typer.Option("--online", help="Also ask arXiv / Semantic Scholar / OpenAlex / Crossref.")
    ] = False,
) -> None:
    """Ranked papers, each with a complete citation (or its missing fields) and the matching passage."""
    from dftune.core.vocabulary import CATEGORIES
    from dftune.tools.literature import rag_search, search_papers_combined

    if bottleneck is not None and bottleneck not in CATEGORIES:
        fail(f"--bottleneck {bottleneck!r} is not one of {', '.join(CATEGORIES)}")
    with user_errors():
        results = [rag_search(query, bottleneck, k=k)]
        if online:
            results.append(search_papers_combined(query, max_results_each=k))
    found = [p.to_json() for r in results for p in r.papers]
    notes = [f"{r.tool}: {n}" for r in results for n in (*r.notes, *r.errors)]
    if as_json:
        emit_json(
            {
                "schema": "dftune.papers.search/1",
                "query": query,
                "bottleneck": bottleneck,
                "results": found,
                "notes": notes,
            }
        )
        return
    from dftune.core.terminal import text

    out = Console()
    for i, p in enumerate(found, start=1):
        who = ", ".join(p["authors"][:3]) + (" et al." if len(p["authors"]) > 3 else "")
        out.print(
            text(
                f"{i}. {p['title']} -- {who or '?'} ({p['venue'] or '?'}, "
                f"{p['year'] or '?'}) {p['url'] or ''}"
            ),
            highlight=False,
        )
        where = f"p. {p['page']}" if p["page"] else p["passage_kind"]
        out.print(text(f'   [{where}] "{(p["passage"] or "")[:300]}"'), highlight=False)
        if p["missing"]:
            out.print(text(f"   missing: {', '.join(p['missing'])}"))
    for note in notes:
        out.print(text(note, "dim"))


spec_app = typer.Typer(help="Workload specs: draft one from a command.", no_args_is_help=True)
app.add_typer(spec_app, name="spec")


@spec_app.command("init", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def spec_init(
    ctx: typer.Context,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the drafted TOML here (default: stdout).")
    ] = None,
) -> None:
    """Draft a workload spec from a command: dftune spec init [--out FILE] -- COMMAND..."""
    from dftune.tools.runner.draft import draft_spec, render_toml

    with user_errors():
        text = render_toml(draft_spec(list(ctx.args), Path.cwd()))
        if out is None:
            sys.stdout.write(text)
        else:
            out.write_text(text, encoding="utf-8")
            sys.stderr.write(f"dftune: drafted spec written to {out}\n")


def main() -> None:  # pragma: no cover - console entry point
    """Console entry: any unexpected failure is still one line on stderr (traceback with DFTUNE_DEBUG=1)."""
    import os

    try:
        app()
    except Exception as exc:
        if os.environ.get("DFTUNE_DEBUG"):
            raise
        from dftune.core.safetext import one_line_text

        sys.stderr.write(
            f"dftune: internal error: {type(exc).__name__}: "
            f"{one_line_text(exc)} (set DFTUNE_DEBUG=1 for a traceback)\n"
        )
        raise SystemExit(1) from None


if __name__ == "__main__":  # pragma: no cover
    main()
