"""The local paper corpus: ``dftune papers ingest|search``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    pass

from dftune.cli.common import (
    _bar,
    app,
    emit_json,
    fail,
    user_errors,
)

papers_app = typer.Typer(
    help="The local paper corpus: ingest PDFs, search papers (offline first).", no_args_is_help=True
)


app.add_typer(papers_app, name="papers")


@papers_app.command("ingest")
def papers_ingest(
    directory: Annotated[Path, typer.Argument(help="Folder of PDFs (searched recursively).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, max=86400, help="Seconds allowed to parse one PDF.")
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
