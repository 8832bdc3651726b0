"""The corpus dftune searches: the paper store with the citation catalog synced in.

The vector store (``dftune.vectorstore``) holds passages and knows nothing of strategies;
this module turns the catalog into curated passages (one summary per citation, one passage
per claim) and opens the store once per process with them indexed.
"""

from __future__ import annotations

import threading
from pathlib import Path

from dftune.core.home import dftune_home
from dftune.tools.catalog import Catalog, CatalogCitation, default_catalog
from dftune.vectorstore.embeddings import Embedder, get_embedder
from dftune.vectorstore.store import PaperStore, Passage, StoredCitation


def catalog_record(c: CatalogCitation) -> StoredCitation:
    """A catalog entry as the store keeps it: every field from the catalog, the link resolved."""
    return StoredCitation(
        **c.bibliographic().model_copy(update={"url": c.link()}).model_dump(),
        source="catalog",
        field_sources=dict.fromkeys(("title", "authors", "year", "venue", "url"), "catalog"),
    )


def catalog_passages(catalog: Catalog) -> list[Passage]:
    """The catalog as passages: one summary per citation and one passage per claim."""
    out: list[Passage] = []
    for c in catalog.citations.values():
        ref = catalog_record(c)
        cited_by = [s for s in catalog.strategies.values() if c.id in s.citations]
        names = "; ".join(sorted({s.name for s in cited_by}))
        if c.summary:
            out.append(
                Passage(
                    id=f"catalog:{c.id}:summary",
                    text=c.summary,
                    citation=ref,
                    kind="summary",
                    context=f"{c.title}. {c.venue}. Strategies: {names}",
                )
            )
        for i, cl in enumerate(c.claims):
            s = catalog.strategies.get(cl.strategy) if cl.strategy else None
            ctx = [c.title]
            if s is not None:
                ctx += [s.name, s.description, " ".join(s.bottlenecks), " ".join(s.requires), s.layer]
            elif cl.topic:
                ctx.append(cl.topic.replace(".", " ").replace("_", " "))
            out.append(
                Passage(
                    id=f"catalog:{c.id}:claim:{i}",
                    text=cl.claim,
                    citation=ref,
                    kind="claim",
                    context=" ".join(x for x in ctx if x),
                    strategy=cl.strategy,
                    topic=cl.topic,
                    verified=cl.verified,
                    evidence=cl.evidence or cl.note,
                )
            )
    return out


_open_lock = threading.Lock()
_stores: dict[tuple[str, str], PaperStore] = {}


def open_store(path: Path | None = None, embedder: Embedder | None = None) -> PaperStore:
    """The store under ``path`` (default ``$DFTUNE_HOME/vectorstore``), opened once per process
    and embedder, with the built-in catalog indexed."""
    emb = embedder or get_embedder()
    root = Path(path) if path is not None else dftune_home() / "vectorstore"
    key = (str(root.resolve()), emb.name)
    with _open_lock:
        store = _stores.get(key)
        if store is None:
            store = PaperStore(root, emb)
            store.sync_catalog(catalog_passages(default_catalog()))
            _stores[key] = store
        return store
