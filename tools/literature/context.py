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

from pydantic import BaseModel, ConfigDict, Field

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
_FS_WORDS = {
    "lustre": "Lustre striping OST",
    "gpfs": "GPFS Spectrum Scale block size",
    "beegfs": "BeeGFS striping",
    "nfs": "NFS network file system",
    "vast": "VAST NFS flash",
    "xfs": "local file system page cache readahead",
    "ext4": "local file system page cache readahead",
    "local": "node-local storage page cache",
    "tmpfs": "memory file system staging",
}


class Stack(BaseModel):
    """The software/system layers a run detected (what the search covers)."""

    model_config = ConfigDict(extra="ignore")

    fs_type: str | None = None
    mpi: str | None = None
    romio: bool = False
    hdf5: bool = False
    ml_framework: str | None = None
    other: list[str] = Field(default_factory=list)

    def layers(self) -> list[tuple[str, str]]:
        """(layer, topic words) for every detected layer; POSIX always."""
        out = [("posix", "POSIX I/O small requests buffering metadata caching readahead")]
        if self.mpi:
            out.append(("mpi", f"{self.mpi} MPI-IO collective I/O aggregation"))
        if self.romio or (self.mpi and self.mpi.lower() in ("mpich", "mvapich", "intel-mpi", "cray-mpich")):
            out.append(("romio", "ROMIO hints collective buffering data sieving cb_nodes"))
        if self.hdf5:
            out.append(("hdf5", "HDF5 parallel I/O chunk cache metadata alignment"))
        if self.fs_type and self.fs_type != "unknown":
            out.append(
                ("filesystem", f"{self.fs_type} {_FS_WORDS.get(self.fs_type, 'file system')} I/O tuning")
            )
        if self.ml_framework:
            out.append(("ml_framework", f"{self.ml_framework} data loading input pipeline workers prefetch"))
        out += [(o, f"{o} I/O optimization") for o in self.other]
        return out


def _stack_from(doc: Mapping[str, Any]) -> Stack | None:
    raw = doc.get("stack")
    if isinstance(raw, Mapping):
        return Stack.model_validate(dict(raw))
    keys = {"fs_type", "mpi", "romio", "hdf5", "ml_framework"}
    if keys & set(doc):
        return Stack.model_validate({k: doc[k] for k in keys if k in doc})
    return None


def detect_stack(ws: Workspace, run_id: str, iteration: int) -> Stack:
    """The stack recorded by earlier steps: ``optimization_context.json`` of the iteration,
    else ``run.json``; an empty stack (POSIX only) when neither says."""
    try:
        ctx = ws.read_json_artifact(run_id, iteration, "optimization_context.json")
        if isinstance(ctx, Mapping) and (st := _stack_from(ctx)) is not None:
            return st
    except (OSError, ValueError, WorkspaceError):
        pass
    meta = ws.read_meta(run_id).model_dump()
    return _stack_from(meta) or Stack()


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
    stack: Stack | Mapping[str, Any] | None = None,
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
    st = stack if isinstance(stack, Stack) else Stack.model_validate(dict(stack)) if stack else None
    st = st or detect_stack(ws, run_id, n)
    store_ = store or open_store()
    rem = remote or default_remote()
    go_remote = (not offline_forced()) if online is None else online
    notes: list[str] = []

    from dftune.tools.kb import opt_kb_lookup

    software = [
        x
        for x in (
            st.mpi,
            "mpi-io" if st.romio or st.mpi else None,
            "hdf5" if st.hdf5 else None,
            st.fs_type,
            st.ml_framework,
            *st.other,
        )
        if x
    ]
    kb = opt_kb_lookup(system=system, workload=workload, software=software)
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
        "stack": st.model_dump(mode="json"),
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
