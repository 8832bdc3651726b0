"""Measuring and tuning workloads: bench, run, resume, approve, history, replay, report, compare, runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from dftune.core.domain.run import RunResult, RunSettings
    from dftune.tools.report.campaign import CampaignResult

from dftune.cli.common import (
    EXIT_RUN_FAILED,
    BudgetOpt,
    DeadlineOpt,
    JsonOpt,
    SettingsCommand,
    TableOpt,
    _progress,
    _show_run,
    app,
    emit_json,
    fail,
    parse_sets,
    refuse_early,
    user_errors,
)
from dftune.core.domain.stats import MIN_DECIDING_PAIRS


def staging_plan(spec: Any, tier: str) -> Any:
    """``--stage``'s plan, or a one-line error naming the spec."""
    from dftune.tools.runner.staging import StagingError, plan_for

    local = spec.resolve(spec.staging.local_dir) if spec.staging.local_dir else None
    try:
        return plan_for(tier, local)
    except StagingError as exc:
        fail(f"{spec.spec_path}: {exc}")


@app.command()
def bench(
    workload: Annotated[Path, typer.Argument(help="Workload spec (TOML).")],
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Knob value NAME=VALUE (repeatable).")
    ] = None,
    replicates: Annotated[
        int | None, typer.Option("--replicates", min=1, max=1000, help="Runs (default: the spec's).")
    ] = None,
    trace: Annotated[
        bool | None,
        typer.Option("--trace/--no-trace", help="Trace with dftracer (default: the spec's tracing mode)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON document (schema dftune.bench/1).")
    ] = False,
    stage: Annotated[
        str | None,
        typer.Option(
            "--stage",
            help="Copy data_dir to shm (/dev/shm) or local ([staging] local_dir) in every replicate, "
            "the copy's time inside the metric (docs/staging.md).",
        ),
    ] = None,
) -> None:
    """Run a workload's replicates (one condition) and report median, p95 and a 95% CI."""
    from dftune.tools.session import preflight

    refuse_early(preflight.missing_spec([workload]))
    from dftune.tools.report.sections import with_unit
    from dftune.tools.runner.bench import bench as run_bench
    from dftune.tools.runner.metric_names import metric_label
    from dftune.tools.runner.spec import load_spec
    from dftune.tools.runner.spec_check import check_runnable

    overrides = parse_sets(set_)
    err = Console(stderr=True)

    from dftune.core.terminal import text

    def show(done: int, total: int, rep: Any) -> None:
        metric = f", {name} {with_unit(rep.metric, unit)}" if rep.metric is not None else ""
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
        check_runnable(spec)
        name, unit = metric_label(spec.metric)
        plan = staging_plan(spec, stage) if stage else None
        try:
            with supervised("bench"):  # SIGTERM/SIGINT kill the workload's group, then we stop
                result = run_bench(
                    spec,
                    overrides=overrides,
                    replicates=replicates,
                    trace=trace,
                    progress=None if as_json else show,
                    stage=plan,
                )
        except DriverInterrupted as exc:
            fail(f"bench {spec.name} {exc}: its workload was killed", 128 + exc.signum)
    if as_json:
        emit_json(result.to_json_dict())
    else:
        out = Console()
        settings = ", ".join(f"{k}={v}" for k, v in result.settings.items())
        out.print(
            text(
                f"{result.workload}{f' ({settings})' if settings else ''}, "
                f"{'traced' if result.traced else 'untraced'}: {result.ok}/{len(result.replicates)} "
                "replicates ok",
                "bold",
            )
        )
        if result.median is not None:
            lo, hi = result.ci95 or (None, None)
            ci = (
                f", 95% CI of the median [{with_unit(lo, unit)}, {with_unit(hi, unit)}]"
                if result.ci95
                else ""
            )
            out.print(
                text(
                    f"{name}: median {with_unit(result.median, unit)}, p95 {with_unit(result.p95, unit)}{ci}"
                )
            )
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


@app.command(cls=SettingsCommand)
def run(
    workloads: Annotated[
        list[Path],
        typer.Argument(
            help="Workload spec(s) (TOML). Several specs, or one campaign TOML, make one campaign."
        ),
    ],
    # run settings: help, defaults and environment variables come from RunSettings (SettingsCommand)
    mode: Annotated[str | None, typer.Option("--mode")] = None,
    max_experiments: Annotated[int | None, typer.Option("--max-experiments")] = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Run (or campaign) id (default: generated).")
    ] = None,
    model: Annotated[str | None, typer.Option("--model")] = None,
    replicates: Annotated[int | None, typer.Option("--replicates")] = None,
    allow_install: Annotated[bool, typer.Option("--allow-install")] = False,
    token_budget: Annotated[int | None, typer.Option("--token-budget")] = None,
    retry_known: Annotated[bool, typer.Option("--retry-known")] = False,
    force: Annotated[bool, typer.Option("--force")] = False,
    declared_only: Annotated[bool, typer.Option("--declared-only")] = False,
    verify_pairs: Annotated[int | None, typer.Option("--verify-pairs")] = None,
    timeout_s: Annotated[float | None, typer.Option("--llm-timeout")] = None,
    retries: Annotated[int | None, typer.Option("--llm-retries")] = None,
    deadline_s: Annotated[float | None, typer.Option("--llm-deadline")] = None,
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
    from dftune.core.domain.run import RunResult
    from dftune.graphs.campaign import CampaignFile, is_campaign_file, load_campaign_file, start_campaign
    from dftune.graphs.runs import run_settings_of
    from dftune.tools.runner.deadline import resolve

    with user_errors():
        llm = llm_settings(timeout_s=timeout_s, retries=retries, deadline_s=deadline_s)
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
            "declared_only": declared_only or None,
            "verify_pairs": verify_pairs,
            "llm": llm,
        }
        settings = run_settings_of(file, {k: v for k, v in cli_settings.items() if v is not None})
        result: RunResult | CampaignResult  # one run, or a campaign
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
    if not isinstance(result, RunResult):  # a campaign
        _show_campaign(result, as_json)
        if all(m.status == "failed" for m in result.members):
            raise typer.Exit(EXIT_RUN_FAILED)
        return
    _show_run(result, as_json, table)
    if result.status == "failed":
        raise typer.Exit(EXIT_RUN_FAILED)


def _single_run(
    spec: Path, settings: RunSettings, run_id: str | None, until: float | None, as_json: bool
) -> RunResult:
    from dftune.agents.budget import Budget
    from dftune.graphs.campaign import RUN_RESERVE_S
    from dftune.graphs.runs import start_run
    from dftune.tools.runner.deadline import Deadline

    budget = Budget(deadline=Deadline(until, reserve_s=RUN_RESERVE_S)) if until is not None else None
    return start_run(spec, settings=settings, run_id=run_id, progress=_progress(as_json), budget=budget)


def _show_campaign(result: CampaignResult, as_json: bool) -> None:
    if as_json:
        emit_json(result.document())
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
            _show_campaign(resume_campaign(run_id, deadline=until, progress=_progress(as_json)), as_json)
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
    via_mcp: Annotated[
        bool, typer.Option("--via-mcp", hidden=True, help="The answer came through an MCP client.")
    ] = False,
    as_json: JsonOpt = False,
    table: TableOpt = False,
) -> None:
    """Answer the first thing a run waits for (an approval, else the oldest change kept on trial), and let it
    continue; also after the run finished."""
    from dftune.tools.session import preflight

    refuse_early(preflight.unknown_run(run_id, campaigns=False, checkpoints=True))
    from dftune.graphs.runs import approve_run

    with user_errors():
        result = approve_run(
            run_id,
            reject=reject,
            reason=reason,
            channel="mcp" if via_mcp else "terminal",
            progress=_progress(as_json),
        )
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
    new_run_id: Annotated[
        str | None,
        typer.Option("--run-id", help="The new run's id (default: RUN_ID-r1, -r2, ...)."),
    ] = None,
    as_json: JsonOpt = False,
    table: TableOpt = False,
) -> None:
    """Start a new run from a saved state of RUN_ID (optionally with changed inputs); RUN_ID,
    its reports and its knowledge-base records stay as they were."""
    from dftune.tools.session import preflight

    refuse_early(preflight.unknown_run(run_id, campaigns=False, checkpoints=True))
    from dftune.graphs.runs import replay_run
    from dftune.graphs.steps import resolve_checkpoint

    sets = parse_sets(set_)
    with user_errors():
        result = replay_run(
            run_id,
            resolve_checkpoint(run_id, checkpoint),
            sets,
            new_run_id=new_run_id,
            progress=_progress(as_json),
        )
    _show_run(result, as_json, table)


@app.command()
def bundle(
    run_id: Annotated[str, typer.Argument(help="Run id or campaign id (see dftune runs).")],
    out: Annotated[Path, typer.Option("--out", help="The new folder to write the bundle into.")],
    as_json: JsonOpt = False,
) -> None:
    """Write the run's kept configuration as a self-contained folder: README, the changes as files,
    scripts that run each arm, the reports, provenance and a manifest (dftune verify checks it).
    A campaign's bundle holds one per workload and an index."""
    from dftune.tools.session import preflight

    refuse_early(preflight.unknown_run(run_id))
    from dftune.graphs.campaign import is_campaign
    from dftune.tools.bundle import export_bundle
    from dftune.tools.bundle.campaign import write_campaign_bundle
    from dftune.tools.report.loader import load_report
    from dftune.tools.session.campaigns import CampaignStore
    from dftune.tools.session.workspace import Workspace

    with user_errors():
        if is_campaign(run_id):
            written = write_campaign_bundle(CampaignStore().read(run_id), Workspace(), out.resolve())
        else:
            run_dir, doc = load_report(run_id)
            written = export_bundle(doc, run_dir, out.resolve())
    if as_json:
        emit_json({"schema": "dftune.bundle.written/1", "run_id": run_id, "bundle": str(written)})
        return
    Console().print(f"bundle of {run_id} written to {written}", soft_wrap=True, highlight=False)
    Console().print(f"check it anywhere: dftune verify {written}", soft_wrap=True, highlight=False)


@app.command()
def verify(
    folder: Annotated[Path, typer.Argument(help="A bundle folder (dftune bundle).")],
    rounds: Annotated[
        int,
        typer.Option("--rounds", min=MIN_DECIDING_PAIRS, max=100, help="Pairs of baseline and tuned runs."),
    ] = 5,
    here: Annotated[
        bool,
        typer.Option("--here", help="Run on this machine even when the run used Slurm or Flux."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check a bundle's manifest, then measure its baseline and tuned arms here (or as jobs of the
    run's batch scheduler), untraced, paired and interleaved: does the gain hold within the
    original's confidence interval? A campaign's bundle: each workload's in turn."""
    from dftune.core.supervise import DriverInterrupted, supervised
    from dftune.tools.bundle import verify as run_verify
    from dftune.tools.bundle.campaign import index_targets
    from dftune.tools.bundle.model import INDEX_FILE

    if not folder.is_dir():
        fail(f"{folder}: not a folder (a bundle is the folder dftune bundle wrote)")
    folder = folder.resolve()
    docs: dict[str, Any] = {}
    with user_errors():
        targets = index_targets(folder) if (folder / INDEX_FILE).is_file() else [("", folder)]
        out = Console()
        try:
            with supervised("verify"):  # SIGTERM/SIGINT: programs killed, scratch copies removed
                for name, target in targets:
                    if name and not as_json:
                        out.print(f"{name}: verifying {target}", highlight=False)
                    doc = run_verify(target, rounds=rounds, local=here)
                    docs[name] = doc
                    if not as_json:
                        _say_verified(out, doc)
        except DriverInterrupted as exc:
            fail(f"verify {folder} {exc}: its programs were killed", 128 + exc.signum)
    if as_json:
        dumped = {k: v.model_dump(mode="json", by_alias=True) for k, v in docs.items()}
        emit_json(
            dumped[""] if list(dumped) == [""] else {"schema": "dftune.verify-index/1", "workloads": dumped}
        )
    if any(d.verdict == "gone" for d in docs.values()):
        raise typer.Exit(EXIT_RUN_FAILED)


def _say_verified(out: Console, doc: Any) -> None:
    ci = f" (95% CI {doc.gain_ci[0]:+.1f}% to {doc.gain_ci[1]:+.1f}%)" if doc.gain_ci else ""
    was = f"{doc.original_gain_pct:+.1f}%" if doc.original_gain_pct is not None else "no gain"
    now = f"{doc.gain_pct:+.1f}%" if doc.gain_pct is not None else "not measured"
    out.print(f"verdict: the gain {doc.verdict} here: {now}{ci}, was {was}", highlight=False)
    out.print(f"{doc.pairs} pair(s); {doc.comparison}", soft_wrap=True, highlight=False)
    if doc.not_applied:
        out.print(f"not applied by verify: {', '.join(doc.not_applied)}", highlight=False)


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
    from dftune.tools.report.loader import load_report
    from dftune.tools.report.writer import write_reports

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
    from dftune.tools.report.plots import plots_unavailable

    if (html or source) and (why := plots_unavailable()):  # once per command, not once per plot
        Console(stderr=True).print(text(why))
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
            RunRenderer(out).render_table(doc.proposal_table)
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
def runs(as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False) -> None:
    """Every run (and campaign) under $DFTUNE_HOME with its status."""
    from dftune.tools.report.run_glance import run_result
    from dftune.tools.session.campaigns import list_campaigns
    from dftune.tools.session.workspace import Workspace

    with user_errors():
        listed = [(r, run_result(r.path)) for r in Workspace().list_runs()]
        campaigns = list_campaigns()
    if as_json:
        rows = [{**r.model_dump(mode="json"), "result": result} for r, result in listed]
        emit_json({"schema": "dftune.runs/1", "runs": rows, "campaigns": campaigns})
        return
    from dftune.tools.report.console import RunRenderer

    RunRenderer(Console()).render_runs(listed, campaigns)
