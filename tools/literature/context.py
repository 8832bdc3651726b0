"""``session_search_optimization_context``: search every layer the run detected, local first.

For each detected layer (POSIX always; the MPI implementation, ROMIO, HDF5, the filesystem,
the ML framework when present) it looks up the knowledge base and the local corpus, then --
online only -- the remote paper services, and writes two artifacts into the run's iteration:

- ``context_opportunities.json``: ``opportunities`` (citation + supporting passage per layer)
  and ``benchmark_targets`` (passages that speak of achieved bandwidth/throughput, as
  snippets with their source; numbers are *not* parsed out of free text -- the reader does).
- ``optimization_papers.json``: every search made and every paper found.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from dftune.core.facts import filesystem_facts
from dftune.core.facts.stacks import topics
from dftune.core.model import StrictModel
from dftune.core.network import offline_forced
from dftune.tools.literature.claims import remember_papers
from dftune.tools.literature.corpus import open_store
from dftune.tools.literature.models import Paper, SearchResult
from dftune.tools.literature.net import Remote
from dftune.tools.literature.remote import default_remote, search_papers_combined
from dftune.tools.literature.search import rag_search
from dftune.tools.session.workspace import Workspace, WorkspaceError
from dftune.vectorstore.store import PaperStore

#: Words that mark a passage as talking about achieved performance (selection, not parsing).
_PERF_WORDS = re.compile(r"\b(bandwidth|throughput|GB/s|MB/s|GiB/s|MiB/s|IOPS|speedup|faster)\b", re.I)


class SearchContext(StrictModel):
    """What the context search covers: the run's software (stack ids, core/facts/stacks.py) and
    the filesystem of its data folder."""

    software: list[str] = Field(default_factory=lambda: ["posix"])
    fs_type: str | None = None

    def layers(self) -> list[tuple[str, str]]:
        """(layer, topic words) for every detected layer (POSIX always), then the filesystem."""
        out = topics(["posix", *self.software])
        fs = next((f for f in filesystem_facts().filesystem if f.id == self.fs_type), None)
        if fs is not None:
            out.append(("filesystem", f"{fs.id} {fs.topic} I/O tuning"))
        return out


def context_of(ws: Workspace, run_id: str, iteration: int) -> SearchContext:
    """The context recorded by earlier steps: ``optimization_context.json`` of the iteration, else
    ``run.json``; POSIX alone when neither says."""
    try:
        doc = ws.read_json_artifact(run_id, iteration, "optimization_context.json")
        if isinstance(doc, Mapping) and "software" in doc:
            return SearchContext(software=list(doc["software"]), fs_type=doc.get("fs_type"))
    except (OSError, ValueError, WorkspaceError):
        pass
    meta = ws.read_meta(run_id).model_dump()
    return SearchContext.model_validate({k: meta[k] for k in ("software", "fs_type") if meta.get(k)})


def _source(p: Paper) -> dict[str, Any]:
    return {
        "title": p.title,
        "authors": p.authors,
        "year": p.year,
        "venue": p.venue,
        "url": p.url,
        "doi": p.doi,
        "citation_id": p.id,
        "page": p.page,
        "origin": p.source,
    }


def session_search_optimization_context(
    run_id: str,
    system: str,
    workload: str,
    *,
    iteration: int | None = None,
    context: SearchContext | None = None,
    store: PaperStore | None = None,
    remote: Remote | None = None,
    online: bool | None = None,
    max_results_each: int = 3,
    k_local: int = 5,
    workspace: Workspace | None = None,
) -> dict[str, Any]:
    """Search every detected layer local-first, then remote; write the two artifacts.

    ``iteration`` defaults to the run's latest ``opt<n>``; ``online=None`` follows
    ``DFTUNE_OFFLINE`` and the reachability of each service. Returns the
    context_opportunities document (its ``artifacts`` key gives the paths written)."""
    ws = workspace or Workspace()
    its = ws.iterations(run_id)
    n = iteration if iteration is not None else (its[-1] if its else None)
    if n is None:
        raise WorkspaceError(f"run {run_id!r} has no opt<n> iteration yet; create one before searching")
    st = context or context_of(ws, run_id, n)
    store_ = store or open_store()
    rem = remote or default_remote()
    go_remote = (not offline_forced()) if online is None else online
    notes: list[str] = []

    from dftune.tools.kb import opt_kb_lookup

    kb = opt_kb_lookup(system=system, workload=workload, software=[*st.software, *filter(None, [st.fs_type])])
    kb_findings = [
        r.model_dump(mode="json") for r in (*kb.system_findings, *kb.software_findings, *kb.workload_findings)
    ]

    searches: list[SearchResult] = []
    opportunities: list[dict[str, Any]] = []
    targets: list[dict[str, Any]] = []
    seen_opp: set[tuple[str, str]] = set()
    seen_target: set[str] = set()
    remote_skipped = False
    for layer, topic in st.layers():
        opp_q = f"{topic} optimization"
        bench_q = f"{topic} achieved bandwidth throughput at scale {st.fs_type or ''}".strip()
        for kind, query in (("opportunity", opp_q), ("benchmark", bench_q)):
            results = [rag_search(query, None, None, k=k_local, store=store_)]
            if go_remote and not remote_skipped:
                res = search_papers_combined(query, max_results_each, remote=rem)
                results.append(res)
                if res.skipped:
                    remote_skipped = True
                    notes.append(f"remote search skipped: {'; '.join(res.notes) or 'offline'}")
                remember_papers([p for p in res.papers if p.complete], store_)
            for res in results:
                searches.append(res)
                for p in res.papers:
                    if not p.passage:
                        continue
                    if kind == "opportunity" and p.complete:
                        key = (layer, p.key())
                        if key in seen_opp:
                            continue
                        seen_opp.add(key)
                        opportunities.append(
                            {
                                "layer": layer,
                                "query": query,
                                **_source(p),
                                "passage": p.passage,
                                "passage_kind": p.passage_kind,
                                "strategy": p.strategy,
                                "verified": p.verified,
                                "trust": p.trust,
                            }
                        )
                    elif kind == "benchmark" and _PERF_WORDS.search(p.passage):
                        if p.passage in seen_target:
                            continue
                        seen_target.add(p.passage)
                        targets.append(
                            {
                                "layer": layer,
                                "query": query,
                                "snippet": p.passage,
                                "source": _source(p),
                                "trust": p.trust,
                            }
                        )
    if not go_remote:
        notes.append("offline: remote paper services skipped (local corpus and knowledge base only)")

    doc: dict[str, Any] = {
        "schema": "dftune.context_opportunities/1",
        "run_id": run_id,
        "iteration": n,
        "system": system,
        "workload": workload,
        "generated": datetime.now(UTC).isoformat(),
        "context": st.model_dump(mode="json"),
        "layers": [name for name, _ in st.layers()],
        "online": go_remote and not remote_skipped,
        "notes": notes,
        "kb_findings": kb_findings,
        "opportunities": opportunities,
        "benchmark_targets": targets,
        "benchmark_targets_note": "snippets selected by wording; read them for the figures (not parsed)",
    }
    unique: dict[str, Paper] = {}
    for res in searches:
        for p in res.papers:
            unique.setdefault(p.key(), p)
    papers_doc = {
        "schema": "dftune.optimization_papers/1",
        "run_id": run_id,
        "iteration": n,
        "generated": doc["generated"],
        "searches": [r.to_json() for r in searches],
        "papers": [p.to_json() for p in unique.values()],
    }
    p1 = ws.write_json_artifact(run_id, n, "context_opportunities.json", doc)
    p2 = ws.write_json_artifact(run_id, n, "optimization_papers.json", papers_doc)
    doc["artifacts"] = {"context_opportunities": str(p1), "optimization_papers": str(p2)}
    return doc
