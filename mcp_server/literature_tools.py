"""The literature tools: the local corpus first, then arXiv and the other paper services."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from dftune.mcp_server.registry import (
    Bottleneck,
    RunId,
    Toolbox,
    _In,
)

box = Toolbox()


class RagSearchIn(_In):
    query: str = Field(min_length=1, description="What to look for, e.g. 'many small reads on lustre'.")
    bottleneck: Bottleneck | None = Field(None, description="Bottleneck category: adds its vocabulary.")
    system_config: str | None = Field(None, description="System words to add, e.g. 'lustre mpich'.")
    k: int = Field(5, ge=1, le=50, description="How many papers.")


@box.tool(
    "rag_search",
    RagSearchIn,
    """Search the local corpus (dftune's citation catalog and ingested PDFs):
       offline, free. Each paper comes with its citation
       fields, what is missing, and the matching passage.""",
)
def rag_search_tool(p: RagSearchIn) -> dict[str, Any]:
    """Local first: citations that need no network and were checked against their source."""
    from dftune.tools.literature import rag_search

    return rag_search(p.query, p.bottleneck, p.system_config, k=p.k).to_json()


class ArxivIn(_In):
    query: str = Field(min_length=1, description="Search words.")
    max_results: int = Field(5, ge=1, le=50, description="How many papers.")
    category: str | None = Field("cs.DC", description="arXiv category, or null for all.")


@box.tool(
    "search_arxiv",
    ArxivIn,
    """Search arXiv (relevance order, optionally one category). Offline
       (DFTUNE_OFFLINE=1 or no network) it returns at once with skipped=true.""",
)
def search_arxiv_tool(p: ArxivIn) -> dict[str, Any]:
    """Remote step of the citation search (dftracer-io-optimization skill) when the local corpus is empty."""
    from dftune.tools.literature import search_arxiv

    return search_arxiv(p.query, p.max_results, p.category).to_json()


class CombinedIn(_In):
    query: str = Field(min_length=1, description="Search words.")
    max_results_each: int = Field(5, ge=1, le=25, description="Results per source.")


@box.tool(
    "search_papers_combined",
    CombinedIn,
    """Search arXiv, Semantic Scholar, OpenAlex and Crossref, merged and
       de-duplicated (the most complete record wins). Offline it returns at once with skipped=true.""",
)
def search_papers_combined_tool(p: CombinedIn) -> dict[str, Any]:
    """Widest remote search, for bottlenecks arXiv alone does not cover."""
    from dftune.tools.literature import search_papers_combined

    return search_papers_combined(p.query, p.max_results_each).to_json()


class ArxivPaperIn(_In):
    paper_id: str = Field(
        min_length=1, description="arXiv id ('2007.06775', 'arXiv:2007.06775v3' or its URL)."
    )


@box.tool(
    "get_arxiv_paper",
    ArxivPaperIn,
    """Fetch one arXiv paper's metadata and abstract by id. Offline it
       returns at once with skipped=true.""",
)
def get_arxiv_paper_tool(p: ArxivPaperIn) -> dict[str, Any]:
    """Completes a citation found by id (authors, venue, year, URL)."""
    from dftune.tools.literature import get_arxiv_paper

    return get_arxiv_paper(p.paper_id).to_json()


class ContextSearchIn(_In):
    run_id: str = RunId
    system: str = Field(min_length=1, description="This machine (for KB system findings).")
    workload: str = Field(min_length=1, description="This application (for KB workload findings).")
    iteration: int | None = Field(
        None, ge=1, le=100_000, description="opt<n> to write into (default: the latest)."
    )
    software: list[str] | None = Field(
        None,
        description="The run's software stack ids (posix, mpi, mpi-io, romio, hdf5, pytorch, ...: "
        "resources/facts/stacks.toml; default: from the run).",
    )
    fs_type: str | None = Field(None, description="The data folder's filesystem (default: from the run).")
    online: bool | None = Field(
        None, description="Force remote search on/off (default: DFTUNE_OFFLINE, reachability)."
    )
    max_results_each: int = Field(3, ge=1, le=25, description="Remote results per source and query.")
    k_local: int = Field(5, ge=1, le=50, description="Local corpus results per query.")


@box.tool(
    "session_search_optimization_context",
    ContextSearchIn,
    """Search every software/system layer the run
       detected (POSIX, MPI, ROMIO, HDF5, filesystem, ML framework), local first (KB + corpus) then remote;
       writes context_opportunities.json and optimization_papers.json into the run's opt<n>.""",
    read_only=False,
)
def session_search_optimization_context_tool(p: ContextSearchIn) -> dict[str, Any]:
    """Stack-wide search once per iteration, so proposals are not limited to the top bottleneck."""
    from dftune.tools.literature import SearchContext, session_search_optimization_context

    return session_search_optimization_context(
        p.run_id,
        p.system,
        p.workload,
        iteration=p.iteration,
        context=None
        if p.software is None and p.fs_type is None
        else SearchContext(software=p.software or ["posix"], fs_type=p.fs_type),
        online=p.online,
        max_results_each=p.max_results_each,
        k_local=p.k_local,
    )


class LocalPapersIn(_In):
    query: str = Field(min_length=1, description="What to look for, e.g. 'metadata storms small files'.")
    bottleneck: Bottleneck | None = Field(None, description="Bottleneck category: adds its vocabulary.")
    k: int = Field(5, ge=1, le=50, description="How many papers.")
    papers_dir: str | None = Field(
        None,
        description="A folder of PDFs to add to the local corpus first (e.g. resources/papers); broken or "
        "hostile files are named and skipped.",
    )


@box.tool(
    "session_search_local_papers",
    LocalPapersIn,
    """Search only the papers ingested into the local corpus (PDFs: `dftune papers ingest`, or papers_dir
       here), offline: each with its citation fields, what is missing, and the page that matched. For the
       reference papers a pipeline must consult when their coverage matches the bottleneck.""",
)
def session_search_local_papers_tool(p: LocalPapersIn) -> dict[str, Any]:
    """The local PDFs alone, so a reference paper is not drowned by catalog entries or remote hits."""
    from pathlib import Path

    from dftune.tools.literature.corpus import open_store
    from dftune.tools.literature.search import hit_to_paper, local_query

    store = open_store()
    ingested: dict[str, Any] | None = None
    if p.papers_dir is not None:
        from dftune.tools.literature.remote import metadata_lookup
        from dftune.vectorstore.ingest import ingest_dir

        folder = Path(p.papers_dir).expanduser()
        if not folder.is_dir():
            raise ValueError(f"{folder}: not a directory")
        ingested = ingest_dir(folder, store, lookup=metadata_lookup).to_json()
    q = local_query(p.query, p.bottleneck)
    papers = [hit_to_paper(h).to_json() for h in store.search(q, p.k, sources=["pdf"])]
    out: dict[str, Any] = {"tool": "session_search_local_papers", "query": q, "papers": papers}
    if ingested is not None:
        out["ingested"] = ingested
    if not papers:
        out["note"] = "no ingested paper matched: add PDFs with `dftune papers ingest DIR` or papers_dir"
    return out
