"""Claims, not just papers: the passage that supports a strategy, for a given citation.

A citation attached to a proposal carries its evidence. When the paper itself is in the
local corpus (an ingested PDF, or an abstract fetched earlier) the evidence is the best
matching passage of *that paper*, with its page; otherwise it is the curated catalog claim,
marked ``catalog_backed`` so the citation guard and the report can tell the two apart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from dftune.core.citation import Citation
from dftune.core.model import StrictModel
from dftune.tools.catalog import Catalog, CatalogCitation, Strategy, default_catalog
from dftune.tools.literature.corpus import catalog_record, open_store
from dftune.tools.literature.models import Paper
from dftune.vectorstore.bm25 import BM25
from dftune.vectorstore.store import PaperStore, Passage, StoredCitation, index_text
from dftune.vectorstore.text import tokens

#: Content words a source passage must share with the claim/strategy to count as support.
MIN_SHARED_TERMS = 3


class Evidence(StrictModel):
    """Why a citation supports a strategy: the passage, where it is, and how it was found."""

    strategy: str
    citation_id: str
    citation: dict[str, Any]
    #: Our catalog claim for this strategy (None for papers outside the catalog).
    claim: str | None = None
    verified: bool = False
    #: Text from the source itself (page or abstract), or the catalog claim when catalog-backed.
    passage: str
    passage_kind: Literal["page", "abstract", "claim", "summary"]
    page: int | None = None
    #: The stored copy the passage was read from (ingested PDF or fetched abstract), if any.
    passage_from: str | None = None
    #: Where the catalog says the claim was checked ("abstract", "full text, Sec. IV").
    checked_in: str | None = None
    #: True when no passage of the paper itself is stored and the evidence is our curated claim.
    catalog_backed: bool
    trust: Literal["curated", "untrusted"]


def guard_accepts(ev: Evidence) -> bool:
    """The issue's rule for the citation guard: evidence is a passage of the source itself
    with a complete citation, or -- only for the curated catalog -- a verified catalog claim."""
    if not ev.citation.get("complete"):
        return False
    if ev.catalog_backed:
        return ev.verified and ev.citation.get("source") == "catalog"
    return bool(ev.passage.strip())


def _norm_title(t: str | None) -> str:
    return re.sub(r"[^a-z0-9]+", " ", (t or "").lower()).strip()


def _same_work(ref: Citation, c: Citation) -> bool:
    if c.doi and ref.doi and c.doi.lower() == ref.doi.lower():
        return True
    if c.arxiv and ref.arxiv and c.arxiv == re.sub(r"v\d+$", "", ref.arxiv):
        return True
    return bool(ref.title) and _norm_title(ref.title) == _norm_title(c.title)


def _best_passage(passages: Sequence[Passage], query: str) -> Passage | None:
    """The passage sharing the most (BM25-weighted) terms with ``query``, if it shares enough."""
    if not passages:
        return None
    scores = BM25([index_text(p) for p in passages]).scores(query)
    i = max(range(len(passages)), key=lambda j: scores[j])
    shared = set(tokens(query)) & set(tokens(passages[i].text))
    return passages[i] if scores[i] > 0 and len(shared) >= MIN_SHARED_TERMS else None


def supporting_passage(
    strategy: Strategy | str,
    citation: CatalogCitation | str,
    *,
    store: PaperStore | None = None,
    catalog: Catalog | None = None,
) -> Evidence | None:
    """The passage of ``citation`` that supports ``strategy``, or None when there is none.

    Order: a passage of the paper itself from the local corpus (PDF page or stored abstract),
    then the curated catalog claim (``catalog_backed=True``). A citation outside the catalog
    (an ingested paper) needs a passage of its own that shares enough terms with the strategy.
    """
    cat = catalog or default_catalog()
    strat = cat.strategies[strategy] if isinstance(strategy, str) else strategy
    cit: CatalogCitation | None = cat.citations.get(citation) if isinstance(citation, str) else citation
    st = store or open_store()
    claims = cit.claims_for(strat.id) if cit is not None else []
    claims = sorted(claims, key=lambda c: not c.verified)
    query = " ".join([*(c.claim for c in claims[:1]), strat.name, strat.description])

    if cit is not None:
        own = [p for p in st.passages() if p.citation.source != "catalog" and _same_work(p.citation, cit)]
    else:
        own = st.passages_of(str(citation))
    best = _best_passage(own, query)
    if best is not None:
        ref = best.citation
        # A catalog paper keeps its checked bibliographic record; the passage is the stored copy's.
        ref_json = _ref_from_catalog(cit) if cit is not None else ref.to_json()
        return Evidence(
            strategy=strat.id,
            citation_id=cit.id if cit is not None else ref.id,
            citation=ref_json,
            passage_from=f"{ref.id} ({best.file or ref.source})",
            claim=claims[0].claim if claims else None,
            verified=bool(claims and claims[0].verified),
            passage=best.text,
            passage_kind=best.kind if best.kind in ("page", "abstract") else "page",
            page=best.page,
            checked_in=claims[0].evidence if claims else None,
            catalog_backed=False,
            trust=best.trust,
        )
    if cit is None or not claims:
        return None
    cl = claims[0]
    ref_json = _ref_from_catalog(cit)
    return Evidence(
        strategy=strat.id,
        citation_id=cit.id,
        citation=ref_json,
        claim=cl.claim,
        verified=cl.verified,
        passage=cl.claim,
        passage_kind="claim",
        checked_in=cl.evidence or cl.note,
        catalog_backed=True,
        trust="curated",
    )


def _ref_from_catalog(c: CatalogCitation) -> dict[str, Any]:
    return catalog_record(c).to_json()


def evidence_for(
    strategy_id: str,
    *,
    store: PaperStore | None = None,
    catalog: Catalog | None = None,
    verified_only: bool = True,
) -> list[Evidence]:
    """Evidence for every citation the catalog gives ``strategy_id`` (source passages first)."""
    cat = catalog or default_catalog()
    s = cat.strategies[strategy_id]
    out = []
    for cid in s.citations:
        ev = supporting_passage(s, cid, store=store, catalog=cat)
        if ev is not None and (ev.verified or not verified_only):
            out.append(ev)
    return sorted(out, key=lambda e: (e.catalog_backed, not e.verified))


def remember_papers(papers: Sequence[Paper], store: PaperStore | None = None) -> int:
    """Keep fetched abstracts in the local corpus (source ``remote``), so later searches and
    :func:`supporting_passage` find them offline. Papers without an abstract are not stored."""
    st = store or open_store()
    passages = []
    for p in papers:
        if not p.abstract or p.source in ("catalog", "local", "context"):
            continue
        ref = StoredCitation(
            id="remote_" + re.sub(r"[^a-z0-9]+", "_", p.key().lower()).strip("_")[:80],
            title=p.title,
            authors=list(p.authors),
            year=p.year,
            venue=p.venue,
            doi=p.doi,
            url=p.url,
            arxiv=p.arxiv,
            kind="paper",
            source="remote",
            field_sources={
                f: p.source
                for f in ("title", "authors", "year", "venue", "doi", "url", "arxiv")
                if getattr(p, f)
            },
        )
        passages.append(
            Passage(
                id=f"{ref.id}:abstract", text=p.abstract, citation=ref, kind="abstract", context=p.title or ""
            )
        )
    return st.add(passages)
