"""The paper store: passages with bibliographic metadata in a persistent chromadb collection.

Lives under ``$DFTUNE_HOME/vectorstore``. One collection per embedder (vectors of different
embedders are never mixed). The curated passages (the citation catalog's
summaries and claims, see ``tools.literature.corpus``) are synced in by the caller, so a fresh
install can cite the core literature offline; ingested PDFs add page-numbered passages. The
store knows passages and their bibliographic fields, nothing of strategies or catalogs.

Search is hybrid: BM25 over the passage text and its context (exact terms, identifiers)
fused by reciprocal rank with the embedding neighbours chromadb returns (word forms, fuzzy
matches). Passage text from papers is data: it is stored and quoted, never interpreted.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import ConfigDict, Field

from dftune.core.citation import Citation
from dftune.core.errors import DftuneError
from dftune.core.home import dftune_home
from dftune.core.model import StrictModel
from dftune.vectorstore.bm25 import BM25
from dftune.vectorstore.embeddings import Embedder, get_embedder

Source = Literal["catalog", "pdf", "remote"]
#: Metadata services whose records (fetched for a DOI or arXiv id) verify a stored citation.
FETCHED_SOURCES = frozenset({"crossref", "arxiv", "semantic_scholar", "openalex"})
PassageKind = Literal["summary", "claim", "page", "abstract"]
_RRF_K = 60.0
_BATCH = 256


class StoreError(DftuneError):
    """The vector store cannot be opened or written."""


class StoredCitation(Citation):
    """A stored paper's citation and where each of its fields came from; a field that could not
    be established is ``None`` and named in ``missing``, never invented."""

    model_config = ConfigDict(extra="forbid")

    source: Source = "catalog"
    #: Where each bibliographic field came from (catalog, sidecar, pdf-metadata, first-page, ...).
    field_sources: dict[str, str] = Field(default_factory=dict)

    @property
    def fetched_by(self) -> str | None:
        """Who established this record: ``catalog`` (curated), or the service whose record fetched
        for the DOI/arXiv id gave its title, authors and year (crossref, arxiv, ...); None when only
        the paper's own sidecar, PDF metadata or first page say so (unverified: anyone can write those)."""
        if self.source == "catalog":
            return "catalog"
        origins = {self.field_sources.get(f, "") for f in ("title", "authors", "year")}
        if len(origins) == 1 and (only := origins.pop()) in FETCHED_SOURCES:
            return only
        return None

    def to_json(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "missing": self.missing, "complete": self.complete}


class Passage(StrictModel):
    """One stored passage: the quotable text, where it sits, and the citation it belongs to."""

    id: str
    text: str
    citation: StoredCitation
    kind: PassageKind
    page: int | None = None
    #: Words that describe the passage without being part of its quote (strategy names,
    #: bottleneck categories, the paper title); indexed, never shown as the paper's words.
    context: str = ""
    strategy: str | None = None
    topic: str | None = None
    verified: bool | None = None
    evidence: str | None = None
    file: str | None = None

    @property
    def trust(self) -> Literal["curated", "untrusted"]:
        """Catalog text was written and checked by us; paper text is untrusted data."""
        return "curated" if self.citation.source == "catalog" else "untrusted"


class Hit(StrictModel):
    passage: Passage
    score: float
    lexical_rank: int | None = None
    vector_rank: int | None = None

    def to_json(self) -> dict[str, Any]:
        p = self.passage
        return {
            "citation": p.citation.to_json(),
            "passage": p.text,
            "page": p.page,
            "passage_kind": p.kind,
            "strategy": p.strategy,
            "verified": p.verified,
            "evidence": p.evidence,
            "trust": p.trust,
            "score": round(self.score, 6),
            "passage_id": p.id,
        }


# --------------------------------------------------------------------------- (de)serialization


def _meta(p: Passage) -> dict[str, Any]:
    """Flatten a passage into chromadb metadata (scalars and non-empty lists only)."""
    c = p.citation
    raw: dict[str, Any] = {
        "citation_id": c.id,
        "title": c.title,
        "authors": c.authors or None,
        "year": c.year,
        "venue": c.venue,
        "doi": c.doi,
        "url": c.url,
        "arxiv": c.arxiv,
        "ckind": c.kind,
        "source": c.source,
        "field_sources": json.dumps(c.field_sources) if c.field_sources else None,
        "kind": p.kind,
        "page": p.page,
        "context": p.context or None,
        "strategy": p.strategy,
        "topic": p.topic,
        "verified": p.verified,
        "evidence": p.evidence,
        "file": p.file,
    }
    return {k: v for k, v in raw.items() if v is not None}


def _passage(pid: str, doc: str, m: dict[str, Any]) -> Passage:
    authors = m.get("authors") or []
    cit = StoredCitation(
        id=str(m["citation_id"]),
        title=m.get("title"),
        authors=[str(a) for a in authors] if isinstance(authors, list) else [str(authors)],
        year=int(m["year"]) if m.get("year") is not None else None,
        venue=m.get("venue"),
        doi=m.get("doi"),
        url=m.get("url"),
        arxiv=m.get("arxiv"),
        kind=str(m.get("ckind", "paper")),
        source=m.get("source", "catalog"),
        field_sources=json.loads(m["field_sources"]) if m.get("field_sources") else {},
    )
    return Passage(
        id=pid,
        text=doc,
        citation=cit,
        kind=m.get("kind", "page"),
        page=int(m["page"]) if m.get("page") is not None else None,
        context=m.get("context", ""),
        strategy=m.get("strategy"),
        topic=m.get("topic"),
        verified=m.get("verified"),
        evidence=m.get("evidence"),
        file=m.get("file"),
    )


def index_text(p: Passage) -> str:
    """What the lexical index and the embedder see: the quote plus its describing context."""
    return f"{p.text}\n{p.context}" if p.context else p.text


def _fingerprint(passages: Sequence[Passage]) -> str:
    h = hashlib.sha256()
    for p in passages:
        h.update(p.model_dump_json().encode())
    return h.hexdigest()[:24]


# --------------------------------------------------------------------------- the store


class PaperStore:
    """Persistent passages + hybrid search. Open it with ``tools.literature.corpus.open_store``
    (one per process, the catalog synced in)."""

    def __init__(self, path: Path | None = None, embedder: Embedder | None = None) -> None:
        # chromadb reads these at import: no telemetry, no phoning home, ever.
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        import chromadb
        from chromadb.config import Settings

        self.path = Path(path) if path is not None else dftune_home() / "vectorstore"
        self.path.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder or get_embedder()
        try:
            self._client = chromadb.PersistentClient(
                path=str(self.path),
                settings=Settings(anonymized_telemetry=False, allow_reset=False),
            )
            self._col = self._client.get_or_create_collection(
                name=_collection_name(self.embedder.name),
                embedding_function=None,  # never chromadb's default: it downloads a model
                metadata={"hnsw:space": "cosine", "embedder": self.embedder.name, "dim": self.embedder.dim},
            )
        except Exception as exc:  # chromadb raises its own hierarchy; all mean "cannot open"
            raise StoreError(f"cannot open the vector store at {self.path}: {exc}") from exc
        self._lock = threading.RLock()
        self._cache: tuple[list[Passage], BM25] | None = None

    # ----- writing

    def add(self, passages: Sequence[Passage]) -> int:
        """Insert or replace passages by id; returns how many were written."""
        if not passages:
            return 0
        with self._lock:
            for start in range(0, len(passages), _BATCH):
                batch = passages[start : start + _BATCH]
                self._col.upsert(
                    ids=[p.id for p in batch],
                    documents=[p.text for p in batch],
                    metadatas=[_meta(p) for p in batch],
                    embeddings=np.asarray(
                        self.embedder.embed([index_text(p) for p in batch]), dtype=np.float32
                    ),
                )
            self._cache = None
        return len(passages)

    def has_citation(self, citation_id: str) -> bool:
        got = self._col.get(where={"citation_id": citation_id}, limit=1, include=[])
        return bool(got["ids"])

    def sync_catalog(self, passages: Sequence[Passage]) -> bool:
        """(Re)index the curated passages (source ``catalog``) when they changed since the last
        sync; True if they did."""
        fp = _fingerprint(passages)
        marker = self.path / f"catalog-{_collection_name(self.embedder.name)}.fingerprint"
        with self._lock:
            try:
                if marker.read_text().strip() == fp and self._count_source("catalog") == len(passages):
                    return False
            except OSError:
                pass
            self._col.delete(where={"source": "catalog"})
            self.add(passages)
            marker.write_text(fp + "\n")
        return True

    def _count_source(self, source: str) -> int:
        return len(self._col.get(where={"source": source}, include=[])["ids"])

    # ----- reading

    def count(self) -> int:
        return int(self._col.count())

    def passages(self) -> list[Passage]:
        return list(self._snapshot()[0])

    def citations(self) -> dict[str, StoredCitation]:
        """Every citation with at least one stored passage, by id."""
        return {p.citation.id: p.citation for p in self._snapshot()[0]}

    def passages_of(self, citation_id: str) -> list[Passage]:
        return [p for p in self._snapshot()[0] if p.citation.id == citation_id]

    def _snapshot(self) -> tuple[list[Passage], BM25]:
        with self._lock:
            if self._cache is None:
                got = self._col.get(include=["documents", "metadatas"])
                docs = got["documents"] or []
                metas = got["metadatas"] or []
                ps = [_passage(i, d, dict(m or {})) for i, d, m in zip(got["ids"], docs, metas, strict=True)]
                ps.sort(key=lambda p: p.id)
                self._cache = (ps, BM25([index_text(p) for p in ps]))
            return self._cache

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        per_citation: bool = True,
        sources: Iterable[Source] | None = None,
        pool: int = 50,
        mode: Literal["hybrid", "lexical", "vector"] = "hybrid",
    ) -> list[Hit]:
        """The ``k`` best passages for ``query`` (hybrid BM25 + embedding, reciprocal-rank fused).

        With ``per_citation`` only the best passage of each citation is kept, so the ``k``
        results are ``k`` different papers. ``mode`` keeps one half alone (for measuring)."""
        passages, bm25 = self._snapshot()
        if not passages or not query.strip():
            return []
        allowed = set(sources) if sources is not None else None
        lex = bm25.scores(query)
        lex_order = [i for i in sorted(range(len(passages)), key=lambda i: -lex[i]) if lex[i] > 0][:pool]
        vec_order: list[int] = []
        if mode != "lexical":
            pos = {p.id: i for i, p in enumerate(passages)}
            n = min(pool, len(passages))
            res = self._col.query(
                query_embeddings=np.asarray(self.embedder.embed([query]), dtype=np.float32),
                n_results=n,
                include=[],
            )
            vec_order = [pos[i] for i in res["ids"][0] if i in pos]
        if mode == "vector":
            lex_order = []
        fused: dict[int, float] = {}
        lrank: dict[int, int] = {}
        vrank: dict[int, int] = {}
        for r, i in enumerate(lex_order):
            fused[i] = fused.get(i, 0.0) + 1.0 / (_RRF_K + r + 1)
            lrank[i] = r + 1
        for r, i in enumerate(vec_order):
            fused[i] = fused.get(i, 0.0) + 1.0 / (_RRF_K + r + 1)
            vrank[i] = r + 1
        hits: list[Hit] = []
        seen: set[str] = set()
        for i in sorted(fused, key=lambda i: (-fused[i], passages[i].id)):
            p = passages[i]
            if allowed is not None and p.citation.source not in allowed:
                continue
            if per_citation:
                if p.citation.id in seen:
                    continue
                seen.add(p.citation.id)
            hits.append(Hit(passage=p, score=fused[i], lexical_rank=lrank.get(i), vector_rank=vrank.get(i)))
            if len(hits) >= k:
                break
        return hits


def _collection_name(embedder_name: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in embedder_name)
    return f"passages-{safe}"[:200].rstrip("-._")
