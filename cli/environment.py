"""The machine and the spec: ``dftune doctor``, ``dftune mcp`` and ``dftune spec init``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from dftune.cli.common import (
    app,
    emit_json,
    fail,
    user_errors,
)


@app.command()
def doctor(
    more: Annotated[
        list[str] | None,
        typer.Argument(help="More paths for --path: `--path A B C` checks all three.", show_default=False),
    ] = None,
    data_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--data-dir",
            help="Report the filesystem of this folder (repeatable); with --path, the run's data folder.",
        ),
    ] = None,
    path: Annotated[
        list[str] | None,
        typer.Option(
            "--path",
            help="Say why this path was or was not counted as the program's data: its class, the "
            "rule that decided it and the rule's source (repeatable; only this is checked).",
        ),
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
    if more and not path:
        fail(f"{more[0]}: a path to check goes after --path (dftune doctor --path PATH...)")
    if path:
        _path_classes([*path, *(more or [])], data_dir or [], as_json)
        return
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


def _path_classes(paths: list[str], data_dirs: list[Path], as_json: bool) -> None:
    """``doctor --path``: each path's class for a run whose data folders are ``data_dirs``."""
    import os

    from dftune.core.facts.paths import RunPaths, classify

    with user_errors():
        run = RunPaths.of(*(os.path.abspath(d) for d in data_dirs))
        found = [classify(p if p.startswith("/") else os.path.abspath(p), run) for p in paths]
    if as_json:
        rows = [{"path": c.path, "class": c.class_, "rule": c.rule, "source": c.source} for c in found]
        emit_json({"paths": rows})
        return
    from dftune.core.terminal import text, word_wrapped

    out = Console()
    width = min(out.width, 80)
    for c in found:
        out.print(text(c.path), soft_wrap=True)
        for line in (f"  {c.class_} (rule {c.rule}): {c.reason}", f"  source: {c.source}"):
            out.print(word_wrapped(text(line), width, indent=4), soft_wrap=True)


@app.command("mcp")
def mcp_cmd(
    allow: Annotated[
        list[Path] | None,
        typer.Option(
            "--allow",
            help="A folder whose workload specs run_start may run (repeatable; default: the current folder).",
        ),
    ] = None,
) -> None:
    """Serve dftune's tools to MCP clients (Claude Code, Codex, ...) over stdio."""
    from dftune.mcp_server import serve

    for folder in allow or []:
        if not folder.is_dir():
            fail(f"--allow {folder}: not a folder")
    with user_errors():
        serve(allow=allow or [Path.cwd()])


spec_app = typer.Typer(help="Workload specs: draft one from a command.", no_args_is_help=True)


app.add_typer(spec_app, name="spec")


@spec_app.command("init", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def spec_init(
    ctx: typer.Context,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the drafted TOML here (default: stdout).")
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="The folder holding the program's data (else found in the command)."),
    ] = None,
) -> None:
    """Draft a workload spec from a command: dftune spec init [--out FILE] [--data-dir DIR] -- COMMAND..."""
    from dftune.tools.runner.draft import draft_spec, render_toml
    from dftune.tools.runner.levers import foreseen

    if data_dir is not None and not data_dir.is_dir():
        fail(f"{data_dir}: --data-dir is not a folder")
    with user_errors():
        draft = draft_spec(list(ctx.args), Path.cwd(), data_dir=data_dir)
        draft.foreseen = foreseen(draft, Path.cwd())
        text = render_toml(draft)
        if out is None:
            sys.stdout.write(text)
        else:  # atomically, and only over a regular file: never into a pipe or a device
            from dftune.core.fsio import atomic_write_bytes

            atomic_write_bytes(out, text.encode("utf-8"), only_over_file=True)
            sys.stderr.write(f"dftune: drafted spec written to {out}\n")
