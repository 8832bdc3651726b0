"""The ``dftune`` command line.  Thin: parse options, call tools, hand results to renderers."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

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
    """One line on stderr, non-zero exit: the contract for every error."""
    sys.stderr.write(f"dftune: error: {message}\n")
    raise typer.Exit(code)


def emit_json(doc: object) -> None:
    """``--json``: one document on stdout and nothing else there."""
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


@contextmanager
def _bar(label: str, quiet: bool) -> Iterator[Any]:
    """A Rich progress bar on stderr fed by ``tick(done, total, what)``; nothing with --json or off a terminal."""
    err = Console(stderr=True)
    if quiet or not err.is_terminal:
        yield None
        return
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("{task.description}"),
                  console=err, transient=True) as bar:  # fmt: skip
        task = bar.add_task("", total=None)

        def tick(done: int, total: int, what: Any) -> None:
            bar.update(task, completed=done, total=total, description=str(getattr(what, "status", what))[:40])

        yield tick


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
) -> None:
    """Read dftracer traces or Darshan logs exactly and summarize their I/O (counts, bytes, time, pattern)."""
    from functools import partial

    from dftune.tools.trace import analyze, analyze_runs
    from dftune.tools.trace.render import AnalysisRenderer
    from dftune.tools.trace.views import VIEWS

    run_analysis: Any = partial(analyze_runs if split_runs else analyze, exclude_helpers=app_only)

    views = view or ["summary"]
    for v in views:
        if v not in VIEWS:
            fail(f"--view {v!r} is not one of {', '.join(VIEWS)}")
    err = Console(stderr=True)
    show_progress = not as_json and err.is_terminal
    with user_errors():
        if show_progress:
            with Progress(TextColumn("reading traces"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=err, transient=True) as bar:  # fmt: skip
                task = bar.add_task("read", total=None)

                def tick(done: int, total: int, _path: str) -> None:
                    bar.update(task, completed=done, total=total)

                result = run_analysis(paths, skip_bad=skip_bad, views=views, scheduler=scheduler,
                                      workers=workers, time_windows=windows, progress=tick)  # fmt: skip
        else:
            result = run_analysis(paths, skip_bad=skip_bad, views=views, scheduler=scheduler,
                                  workers=workers, time_windows=windows)  # fmt: skip
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
    return f"run {run.index} of {run.runs} ({', '.join(run.hosts) or 'unknown host'}, {run.span_s:,.3f} s{apart})"


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
) -> None:
    """Name the I/O bottlenecks (rules as data), pick the metric, gate whether tuning pays off."""
    from dftune.tools.diagnose.engine import diagnose as run_diagnosis
    from dftune.tools.diagnose.engine import diagnose_runs
    from dftune.tools.diagnose.render import DiagnosisRenderer

    if split_runs:
        with user_errors():
            results = diagnose_runs(paths, data_dirs=data_dir or [], skip_bad=skip_bad, scheduler=scheduler)
        if as_json:
            emit_json({"schema": "dftune.diagnosis.runs/1", "runs": [d.to_json_dict() for d in results]})
            return
        out = Console()
        for d in results:
            out.rule(_run_title(d.run))
            DiagnosisRenderer(out).render(d)
        return
    with user_errors():
        result = run_diagnosis(paths, data_dirs=data_dir or [], skip_bad=skip_bad, scheduler=scheduler)
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
    from dftune.tools.runner.bench import bench as run_bench
    from dftune.tools.runner.spec import load_spec

    overrides = parse_sets(set_)
    err = Console(stderr=True)

    def show(done: int, total: int, rep: Any) -> None:
        metric = f" metric {rep.metric:g}" if rep.metric is not None else ""
        err.print(f"replicate {done}/{total}: {rep.status} {rep.wall_s:.3f} s{metric}")

    from dftune.core.supervise import DriverInterrupted, supervised

    with user_errors():
        spec = load_spec(workload)
        try:
            with supervised("bench"):  # SIGTERM/SIGINT kill the workload's group, then we stop
                result = run_bench(spec, overrides=overrides, replicates=replicates, trace=trace,
                                   progress=None if as_json else show)  # fmt: skip
        except DriverInterrupted as exc:
            fail(f"bench {spec.name} {exc}: its workload was killed", 128 + exc.signum)
    if as_json:
        emit_json(result.to_json_dict())
        return
    out = Console()
    out.print(f"[bold]{result.workload}[/bold] {result.settings} traced={result.traced} "
              f"({result.ok}/{len(result.replicates)} ok)")  # fmt: skip
    if result.median is not None:
        ci = f", 95% CI of the median [{result.ci95[0]:.4g}, {result.ci95[1]:.4g}]" if result.ci95 else ""
        out.print(f"median {result.median:.4g}, p95 {result.p95:.4g}{ci}")
    for note in result.notes:
        out.print(f"[dim]{note}[/dim]")
    if result.stopped_reason:
        out.print(f"[yellow]{result.stopped_reason}[/yellow]")
    if result.trace_dir:
        out.print(f"traces: {result.trace_dir}")


def _progress(as_json: bool) -> Any:
    """Progress lines on stderr (Rich), silent with --json."""
    from dftune.agents.context import silent

    if as_json:
        return silent
    err = Console(stderr=True)
    return lambda node, message: err.print(f"[dim]{node:>10}[/dim] {message}")


def _show_run(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(result)
        return
    from dftune.tools.report.console import RunRenderer

    RunRenderer(Console()).render(result)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (schema dftune.run/1).")]


@app.command()
def run(
    workload: Annotated[Path, typer.Argument(help="Workload spec (TOML).")],
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            help="autonomous (overnight: no-sudo L1/L2 changes approved by policy) "
            "or interactive (every change waits for dftune approve).",
        ),
    ] = "autonomous",
    max_experiments: Annotated[int, typer.Option("--max-experiments", min=0, help="Experiment budget.")] = 6,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Run id (default: generated).")] = None,
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="rules (offline, deterministic) or PROVIDER:MODEL "
            "(anthropic:..., openai:...; OPENAI_BASE_URL for compatible servers).",
        ),
    ] = "rules",
    replicates: Annotated[
        int | None, typer.Option("--replicates", min=1, help="Replicates per arm (default: the spec's).")
    ] = None,
    allow_install: Annotated[
        bool, typer.Option("--allow-install", help="Let the installer pip-install dftracer if it is missing.")
    ] = False,
    token_budget: Annotated[
        int,
        typer.Option("--token-budget", min=0, help="Tokens the chat model may spend; then the rules decide."),
    ] = 200_000,
    retry_known: Annotated[
        bool,
        typer.Option(
            "--retry-known",
            help="Measure again what the knowledge base already measured here "
            "without a gain (against the same incumbent).",
        ),
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
    as_json: JsonOpt = False,
) -> None:
    """Tune a workload: baseline, diagnosis, cited proposals, one guarded experiment at a time, report."""
    from dftune.agents.reasoner import llm_settings
    from dftune.graphs.runs import start_run

    with user_errors():
        llm = llm_settings(timeout_s=llm_timeout, retries=llm_retries, deadline_s=llm_deadline)
        result = start_run(workload, mode=mode, max_experiments=max_experiments, run_id=run_id, model=model,
                           replicates=replicates, token_budget=token_budget, llm=llm, allow_install=allow_install,
                           retry_known=retry_known, progress=_progress(as_json))  # fmt: skip
    _show_run(result, as_json)
    if result["status"] == "failed":
        raise typer.Exit(EXIT_RUN_FAILED)


@app.command()
def resume(run_id: Annotated[str, typer.Argument(help="Run id.")], as_json: JsonOpt = False) -> None:
    """Continue a run after a crash or kill, from its last saved graph state."""
    from dftune.graphs.runs import resume_run

    with user_errors():
        result = resume_run(run_id, progress=_progress(as_json))
    _show_run(result, as_json)


@app.command()
def approve(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    reject: Annotated[bool, typer.Option("--reject", help="Refuse the pending change instead.")] = False,
    reason: Annotated[str, typer.Option("--reason", help="Why (kept in the run's record).")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Answer the change a run is waiting for, and let it continue."""
    from dftune.graphs.runs import approve_run

    with user_errors():
        result = approve_run(run_id, reject=reject, reason=reason, progress=_progress(as_json))
    _show_run(result, as_json)


@app.command("history")
def history_cmd(run_id: Annotated[str, typer.Argument(help="Run id.")], as_json: JsonOpt = False) -> None:
    """The run's saved graph states (checkpoints), oldest first."""
    from dftune.graphs.runs import history

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
    checkpoint: Annotated[str, typer.Option("--checkpoint", help="Checkpoint id (see dftune history).")],
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Change an input before forking: FIELD=VALUE (repeatable)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Fork the run from a saved state (optionally with changed inputs) and run the fork."""
    from dftune.graphs.runs import replay_run

    sets = parse_sets(set_)
    with user_errors():
        result = replay_run(run_id, checkpoint, sets, progress=_progress(as_json))
    _show_run(result, as_json)


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
) -> None:
    """Write a finished run's report.md (and report.html with --html), or the HTML report of one
    Darshan log or trace (analysis, diagnosis, plots); print where they are."""
    from dftune.tools.report.writer import write_reports

    with user_errors():
        if Path(run_id).exists():  # a log or trace, not a run: its analysis report (always HTML)
            from dftune.tools.report.analysis_report import write_input_report

            paths = write_input_report(run_id, output)
        else:
            paths = write_reports(run_id, html=html)
    if as_json:
        emit_json({"schema": "dftune.report/1", "run_id": run_id, **paths})
        return
    out = Console()
    for kind, path in paths.items():
        out.print(f"{kind}: {path}", highlight=False, soft_wrap=True)


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
    """Is dftracer usable here, what does it trace and not trace, are MPI/HDF5 present, which FS holds the data."""
    from dftune.agents.doctor import doctor as run_doctor

    with user_errors():
        report = run_doctor(data_dir, allow_install=allow_install)
    if as_json:
        emit_json(report)
    else:
        out = Console()
        t = report["tracer"]
        mark = "[green]usable[/green]" if t.get("usable") else f"[red]not usable[/red]: {t.get('reason')}"
        out.print(f"dftracer {report['software']['dftracer'] or '(not installed)'}: {mark}")
        if t.get("preload_library"):
            out.print(f"  preload library: {t['preload_library']}")
        if t.get("smoke_calls_traced"):
            out.print("  traced by the smoke program: " + ", ".join(sorted(t["smoke_calls_traced"])))
        for p in report["pitfalls"]:
            out.print(f"  [yellow]blind spot[/yellow]: {p['message']}")
        for name, version in report["software"].items():
            if name != "dftracer":
                out.print(f"{name}: {version or '[dim]not found[/dim]'}")
        for fs in report["filesystems"]:
            warn = f" [yellow]{fs['warning']}[/yellow]" if fs.get("warning") else ""
            out.print(f"{fs['path']}: {fs['fs_type']} (mount {fs['mount_point']}){warn}")
    if not report["ok"]:
        raise typer.Exit(1)


@app.command()
def runs(as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False) -> None:
    """Every run under $DFTUNE_HOME with its status."""
    from dftune.tools.session.workspace import Workspace

    with user_errors():
        rows = [r.model_dump(mode="json") for r in Workspace().list_runs()]
    if as_json:
        emit_json({"schema": "dftune.runs/1", "runs": rows})
        return
    from rich.table import Table

    t = Table(title="Runs")
    for col in ("run", "workload", "status", "created", "iterations", "next"):
        t.add_column(col, overflow="fold")
    for r in rows:
        status = r["status"] + (f" ({r['reason']})" if r.get("reason") else "")
        status += f", driven by pid {r['driver_pid']}" if r.get("driver_pid") else ""
        t.add_row(Text(r["id"]), Text(str(r["workload"])), Text(status), str(r["created"])[:19],
                  str(len(r["iterations"])), Text(r.get("next_step") or ""))  # fmt: skip
    Console().print(t)


@app.command("mcp")
def mcp_cmd() -> None:
    """Serve dftune's tools to MCP clients (Claude Code, Codex, ...) over stdio."""
    from dftune.mcp_server import serve

    serve()


kb_app = typer.Typer(help="The optimization knowledge base: measured, guarded findings from earlier runs.",
                     no_args_is_help=True)  # fmt: skip
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
    out = Console()
    for title, rows in (("system (L3)", found.system_findings), ("software (L2)", found.software_findings),
                        ("workload (L1)", found.workload_findings)):  # fmt: skip
        out.print(f"[bold]{title}[/bold]: {len(rows)} finding(s)")
        for r in rows:
            out.print(f"  {r.strategy} on {r.workload}@{r.system}: {r.verdict} ({r.change_pct:+.1f}% {r.metric})"
                      if r.change_pct is not None else f"  {r.strategy} on {r.workload}@{r.system}: {r.verdict}")  # fmt: skip


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
        Console().print(f"knowledge base written to {written}")


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


papers_app = typer.Typer(help="The local paper corpus: ingest PDFs, search papers (offline first).",
                         no_args_is_help=True)  # fmt: skip
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
        report = ingest_dir(directory, open_store(), limits=IngestLimits(timeout_s=timeout, memory_mb=memory_mb),
                            lookup=metadata_lookup,
                            progress=tick)  # fmt: skip
    if as_json:
        emit_json(report.to_json())
        return
    out = Console()
    for f in report.files:
        if f.status == "skipped":
            out.print(f"[red]skipped[/red] {f.file}: {f.reason}", markup=True, highlight=False)
        else:
            missing = f" (missing: {', '.join(f.missing)})" if f.missing else ""
            out.print(f"{f.status} {f.file}: {f.title or '(no title)'}, {f.passages} passage(s){missing}",
                      markup=False, highlight=False)  # fmt: skip
    out.print(f"{len(report.ingested)} ingested, {len(report.skipped)} skipped", markup=False)


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
        emit_json({"schema": "dftune.papers.search/1", "query": query, "bottleneck": bottleneck,
                   "results": found, "notes": notes})  # fmt: skip
        return
    out = Console()
    for i, p in enumerate(found, start=1):
        who = ", ".join(p["authors"][:3]) + (" et al." if len(p["authors"]) > 3 else "")
        out.print(f"{i}. {p['title']} -- {who or '?'} ({p['venue'] or '?'}, {p['year'] or '?'}) {p['url'] or ''}",
                  markup=False, highlight=False)  # fmt: skip
        where = f"p. {p['page']}" if p["page"] else p["passage_kind"]
        out.print(f'   [{where}] "{(p["passage"] or "")[:300]}"', markup=False, highlight=False)
        if p["missing"]:
            out.print(f"   missing: {', '.join(p['missing'])}", markup=False)
    for note in notes:
        out.print(note, style="dim", markup=False)


def main() -> None:  # pragma: no cover - console entry point
    """Console entry: any unexpected failure is still one line on stderr (traceback with DFTUNE_DEBUG=1)."""
    import os

    try:
        app()
    except Exception as exc:
        if os.environ.get("DFTUNE_DEBUG"):
            raise
        sys.stderr.write(
            f"dftune: internal error: {type(exc).__name__}: {exc} (set DFTUNE_DEBUG=1 for a traceback)\n"
        )
        raise SystemExit(1) from None


if __name__ == "__main__":  # pragma: no cover
    main()
