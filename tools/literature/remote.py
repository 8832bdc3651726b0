"""Paper services: arXiv (through the ``arxiv`` package), Semantic Scholar, OpenAlex, Crossref.

Every request goes through one :class:`~dftune.tools.literature.net.Remote` (cache, rate
limit, timeout, retries, offline check); the ``arxiv`` client's own HTTP session is replaced
by an adapter onto it, so the package builds queries and parses Atom feeds while dftune
controls the network. Replies are normalized into :class:`Paper`; a malformed reply is an
error of that source, never a crash of the search.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from typing import Any

import requests

from dftune.tools.literature.models import Paper, SearchResult
from dftune.tools.literature.net import Offline, Remote, RemoteError

ARXIV_ID = re.compile(r"(?:arxiv[:/ ]?|abs/|pdf/)?(\d{4}\.\d{4,5})(v\d+)?", re.IGNORECASE)
S2_SEARCH = "https://api.semanticscholar.org/graph/v1/paper/search"
S2_FIELDS = "title,authors,year,venue,externalIds,url,abstract,openAccessPdf,publicationVenue"
OPENALEX_WORKS = "https://api.openalex.org/works"
CROSSREF_WORKS = "https://api.crossref.org/works"

_default_remote: Remote | None = None


def default_remote() -> Remote:
    """The process-wide :class:`Remote` (so rate limits hold across calls)."""
    global _default_remote
    if _default_remote is None:
        _default_remote = Remote()
    return _default_remote


def _clean(text: Any) -> str | None:
    if not isinstance(text, str):
        return None
    t = re.sub(r"\s+", " ", text).strip()
    return t or None


def _year(value: Any) -> int | None:
    try:
        y = int(value)
    except (TypeError, ValueError):
        return None
    return y if 1900 <= y <= 2100 else None


def _skip(tool: str, query: str, exc: Exception) -> SearchResult:
    if isinstance(exc, Offline):
        return SearchResult(tool=tool, query=query, skipped=True, notes=[str(exc)])
    return SearchResult(tool=tool, query=query, errors=[f"{type(exc).__name__}: {exc}"])


# --------------------------------------------------------------------------- arXiv


class _RemoteSession(requests.Session):
    """A ``requests`` session for the arxiv client whose GETs go through :class:`Remote`."""

    def __init__(self, remote: Remote) -> None:
        super().__init__()
        self._remote = remote

    def get(self, url: str | bytes, **_kwargs: Any) -> requests.Response:  # type: ignore[override]
        u = url.decode() if isinstance(url, bytes) else url
        try:
            got = self._remote.get(u)
            status, body = got.status, got.body
        except Offline:
            raise
        except RemoteError as exc:
            if exc.status is None:
                raise
            status, body = exc.status, b""
        resp = requests.Response()
        resp.status_code = status
        resp._content = body
        resp.url = u
        return resp


def _arxiv_client(remote: Remote) -> Any:
    import arxiv

    # Retries and the 3 s spacing are the Remote's job (it also caches and checks offline).
    client = arxiv.Client(page_size=50, delay_seconds=0.0, num_retries=0)
    client._session = _RemoteSession(remote)
    return client


def _from_arxiv(r: Any) -> Paper:
    short = r.get_short_id() if hasattr(r, "get_short_id") else None
    base = re.sub(r"v\d+$", "", short) if short else None
    journal = _clean(getattr(r, "journal_ref", None))
    published = getattr(r, "published", None)
    return Paper(
        title=_clean(r.title),
        authors=[a.name for a in getattr(r, "authors", []) if getattr(a, "name", None)],
        year=published.year if published is not None else None,
        venue=journal or (f"arXiv preprint arXiv:{base}" if base else None),
        doi=_clean(getattr(r, "doi", None)),
        url=None if base else _clean(getattr(r, "entry_id", None)),  # link() gives the arXiv page
        arxiv=base,
        pdf_url=_clean(getattr(r, "pdf_url", None)),
        abstract=_clean(getattr(r, "summary", None)),
        source="arxiv",
        passage=_clean(getattr(r, "summary", None)),
        passage_kind="abstract",
    )


def search_arxiv(
    query: str, max_results: int = 5, category: str | None = "cs.DC", *, remote: Remote | None = None
) -> SearchResult:
    """arXiv search (``search_arxiv``, dftracer-io-optimization skill): by relevance, maybe one category."""
    import arxiv

    rem = remote or default_remote()
    q = query.strip()
    full = f"({_arxiv_terms(q)}) AND cat:{category}" if category else _arxiv_terms(q)
    try:
        search = arxiv.Search(query=full, max_results=max(1, min(max_results, 50)))
        papers = [_from_arxiv(r) for r in _arxiv_client(rem).results(search)]
    except (RemoteError, arxiv.ArxivError, requests.RequestException) as exc:
        return _skip("search_arxiv", query, exc)
    except Exception as exc:  # a malformed feed can raise from the parser; report it, go on
        return SearchResult(tool="search_arxiv", query=query, errors=[f"malformed arXiv reply: {exc}"])
    return SearchResult(tool="search_arxiv", query=query, papers=papers)


def _arxiv_terms(q: str) -> str:
    """Plain words as an AND of ``all:`` terms (arXiv's default OR-ish parsing is too loose)."""
    words = [w for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", q) if len(w) > 1]
    return " AND ".join(f"all:{w}" for w in words[:8]) or "all:io"


def get_arxiv_paper(paper_id: str, *, remote: Remote | None = None) -> SearchResult:
    """One arXiv paper by id (``2007.06775``, ``arXiv:2007.06775v3`` or an abs/pdf URL)."""
    import arxiv

    m = ARXIV_ID.search(paper_id or "")
    if not m:
        return SearchResult(tool="get_arxiv_paper", query=paper_id, errors=[f"not an arXiv id: {paper_id!r}"])
    try:
        search = arxiv.Search(id_list=[m.group(1) + (m.group(2) or "")], max_results=1)
        papers = [_from_arxiv(r) for r in _arxiv_client(remote or default_remote()).results(search)]
    except (RemoteError, arxiv.ArxivError, requests.RequestException) as exc:
        return _skip("get_arxiv_paper", paper_id, exc)
    except Exception as exc:
        return SearchResult(tool="get_arxiv_paper", query=paper_id, errors=[f"malformed arXiv reply: {exc}"])
    return SearchResult(tool="get_arxiv_paper", query=paper_id, papers=papers[:1])


# --------------------------------------------------------------------------- JSON services


#: Each JSON search service: its name in messages, its URL, and the keys down to its result list.
_SERVICES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "semantic_scholar": ("Semantic Scholar", S2_SEARCH, ("data",)),
    "openalex": ("OpenAlex", OPENALEX_WORKS, ("results",)),
    "crossref": ("Crossref", CROSSREF_WORKS, ("message", "items")),
}


def _json_search(
    tool: str,
    params: dict[str, Any],
    convert: Callable[[dict[str, Any]], Paper],
    query: str,
    remote: Remote | None,
) -> SearchResult:
    """One JSON search service: fetch, find the result list
    (else a malformed-reply error), convert each row."""
    service, url, path = _SERVICES[tool]
    rem = remote or default_remote()
    try:
        rows: Any = rem.get(url, params).json()
        for key in path:
            rows = _obj(rows).get(key)
        if not isinstance(rows, list):
            raise RemoteError(f"{service} reply has no result list")
        papers = [p for p in (convert(r) for r in rows if isinstance(r, dict)) if p.title]
    except RemoteError as exc:
        return _skip(tool, query, exc)
    return SearchResult(tool=tool, query=query, papers=papers)


def search_semantic_scholar(
    query: str, max_results: int = 5, *, remote: Remote | None = None
) -> SearchResult:
    params = {"query": query, "limit": max(1, min(max_results, 100)), "fields": S2_FIELDS}
    return _json_search("semantic_scholar", params, _from_s2, query, remote)


def _obj(v: Any) -> dict[str, Any]:
    """A JSON object, or an empty one when the reply put something else there."""
    return v if isinstance(v, dict) else {}


def _from_s2(r: dict[str, Any]) -> Paper:
    ext = _obj(r.get("externalIds"))
    doi, arx = _clean(ext.get("DOI")), _clean(ext.get("ArXiv"))
    pv = _obj(r.get("publicationVenue"))
    pdf = _obj(r.get("openAccessPdf"))
    return Paper(
        title=_clean(r.get("title")),
        authors=[a["name"] for a in r.get("authors") or [] if isinstance(a, dict) and _clean(a.get("name"))],
        year=_year(r.get("year")),
        venue=_clean(r.get("venue")) or _clean(pv.get("name")),
        doi=doi,
        url=None if doi or arx else _clean(r.get("url")),  # link() gives the DOI's or arXiv page
        arxiv=arx,
        pdf_url=_clean(pdf.get("url")),
        abstract=_clean(r.get("abstract")),
        passage=_clean(r.get("abstract")),
        passage_kind="abstract" if _clean(r.get("abstract")) else None,
        source="semantic_scholar",
    )


def search_openalex(query: str, max_results: int = 5, *, remote: Remote | None = None) -> SearchResult:
    params = {"search": query, "per-page": max(1, min(max_results, 50))}
    return _json_search("openalex", params, _from_openalex, query, remote)


def _inverted_abstract(inv: Any) -> str | None:
    """OpenAlex ships abstracts as word -> positions; put the words back in order."""
    if not isinstance(inv, dict):
        return None
    slots: dict[int, str] = {}
    for word, positions in inv.items():
        for pos in positions if isinstance(positions, list) else []:
            if isinstance(pos, int):
                slots[pos] = str(word)
    return " ".join(slots[i] for i in sorted(slots)) or None


def _from_openalex(r: dict[str, Any]) -> Paper:
    doi = _clean(r.get("doi"))
    if doi:
        doi = re.sub(r"^https?://(dx\.)?doi\.org/", "", doi)
    loc = _obj(r.get("primary_location"))
    src = _obj(loc.get("source"))
    abstract = _inverted_abstract(r.get("abstract_inverted_index"))
    authors = []
    for a in r.get("authorships") or []:
        name = _obj(_obj(a).get("author")).get("display_name")
        if _clean(name):
            authors.append(str(name))
    return Paper(
        title=_clean(r.get("title") or r.get("display_name")),
        authors=authors,
        year=_year(r.get("publication_year")),
        venue=_clean(src.get("display_name")),
        doi=doi,
        url=None if doi else _clean(loc.get("landing_page_url")) or _clean(r.get("id")),
        pdf_url=_clean(loc.get("pdf_url")),
        abstract=abstract,
        passage=abstract,
        passage_kind="abstract" if abstract else None,
        source="openalex",
    )


def search_crossref(query: str, max_results: int = 5, *, remote: Remote | None = None) -> SearchResult:
    params = {"query.bibliographic": query, "rows": max(1, min(max_results, 50))}
    return _json_search("crossref", params, crossref_paper, query, remote)


def crossref_doi(doi: str, *, remote: Remote | None = None) -> Paper | None:
    """Bibliographic record of one DOI from Crossref (ingestion fills missing fields from it)."""
    rem = remote or default_remote()
    doc = rem.get(f"{CROSSREF_WORKS}/{urllib.parse.quote(doi, safe='/')}").json()
    msg = doc.get("message") if isinstance(doc, dict) else None
    return crossref_paper(msg) if isinstance(msg, dict) else None


def crossref_paper(r: dict[str, Any]) -> Paper:
    def first(v: Any) -> str | None:
        return _clean(v[0]) if isinstance(v, list) and v else _clean(v)

    year = None
    for key in ("published-print", "published-online", "issued", "published"):
        parts = _obj(r.get(key)).get("date-parts")
        if isinstance(parts, list) and parts and isinstance(parts[0], list) and parts[0]:
            year = _year(parts[0][0])
            if year:
                break
    authors = []
    for a in r.get("author") or []:
        if isinstance(a, dict):
            name = " ".join(x for x in (_clean(a.get("given")), _clean(a.get("family"))) if x) or _clean(
                a.get("name")
            )
            if name:
                authors.append(name)
    doi = _clean(r.get("DOI"))
    abstract = _clean(re.sub(r"<[^>]+>", " ", r["abstract"])) if isinstance(r.get("abstract"), str) else None
    return Paper(
        title=first(r.get("title")),
        authors=authors,
        year=year,
        venue=first(r.get("container-title")) or _clean(r.get("publisher")),
        doi=doi,
        url=None if doi else _clean(r.get("URL")),
        abstract=abstract,
        passage=abstract,
        passage_kind="abstract" if abstract else None,
        source="crossref",
    )


COMBINED_SOURCES = ("arxiv", "semantic_scholar", "openalex", "crossref")


def search_papers_combined(
    query: str,
    max_results_each: int = 5,
    *,
    sources: tuple[str, ...] = COMBINED_SOURCES,
    remote: Remote | None = None,
) -> SearchResult:
    """arXiv + Semantic Scholar (+ OpenAlex, Crossref), merged and de-duplicated by DOI /
    arXiv id / title; the record with the most complete metadata wins, abstracts are kept."""
    rem = remote or default_remote()
    runs = {
        "arxiv": lambda: search_arxiv(query, max_results_each, None, remote=rem),
        "semantic_scholar": lambda: search_semantic_scholar(query, max_results_each, remote=rem),
        "openalex": lambda: search_openalex(query, max_results_each, remote=rem),
        "crossref": lambda: search_crossref(query, max_results_each, remote=rem),
    }
    merged: dict[str, Paper] = {}
    out = SearchResult(tool="search_papers_combined", query=query)
    skipped = 0
    for name in sources:
        res = runs[name]()
        skipped += res.skipped
        out.notes += [f"{name}: {n}" for n in res.notes]
        out.errors += [f"{name}: {e}" for e in res.errors]
        for p in res.papers:
            k = p.key()
            have = merged.get(k)
            if have is None or len(p.missing) < len(have.missing):
                if have is not None and not p.abstract and have.abstract:
                    p = p.model_copy(
                        update={
                            "abstract": have.abstract,
                            "passage": have.passage,
                            "passage_kind": have.passage_kind,
                        }
                    )
                merged[k] = p
    out.papers = list(merged.values())
    out.skipped = skipped == len(sources)
    return out


def metadata_lookup(kind: str, ident: str) -> dict[str, Any] | None:
    """Fields for a DOI (Crossref) or an arXiv id (arXiv) when the network allows; else None."""
    try:
        if kind == "doi":
            p = crossref_doi(ident)
        else:
            res = get_arxiv_paper(ident)
            p = res.papers[0] if res.papers else None
    except RemoteError:
        return None
    if p is None:
        return None
    return {
        "title": p.title,
        "authors": p.authors,
        "year": p.year,
        "venue": p.venue,
        "doi": p.doi,
        "url": p.link(),
    }
