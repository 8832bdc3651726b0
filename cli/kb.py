"""The optimization knowledge base: ``dftune kb lookup|render|restore``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    pass

from dftune.cli.common import (
    app,
    emit_json,
    user_errors,
)

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
