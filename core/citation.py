"""The one citation model, and the one way a citation reads.

:class:`Citation` is a bibliographic record a reader can check: the catalog's entries, the
papers a search finds and the papers stored in the local corpus are all Citations (their
models extend this one). Unknown fields stay ``None`` and :attr:`Citation.missing` names them;
nothing is ever invented. :meth:`Citation.link` is the only place a DOI or arXiv id becomes a
URL, and :meth:`Citation.reference` the only place the reference line is formatted.

:class:`CitedClaim` is a citation together with what it supports: the claim for one strategy,
the source's own passage when the corpus holds it, and where the pair came from. Proposals,
the citation guard and the knowledge base all use it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from dftune.core.model import StrictModel

#: Fields a complete citation needs (dftracer-io-optimization skill: authors, title, venue/year, a URL).
REQUIRED = ("authors", "title", "venue", "year", "url")
#: Schemes a citation's URL may use: anything else (javascript:, data:, file:) is refused.
URL_SCHEMES = ("https://", "http://")


def safe_url(url: str | None) -> str | None:
    """``url`` when it is an http(s) URL without whitespace, else None (reports link nothing else)."""
    if not url:
        return None
    text = url.strip()
    if not text.lower().startswith(URL_SCHEMES) or any(ch.isspace() or ord(ch) < 32 for ch in text):
        return None
    return text


class Citation(StrictModel):
    """A bibliographic reference; a field that could not be established stays None."""

    id: str = ""
    #: paper, report, docs (a documentation page), ...
    kind: str = "paper"
    authors: list[str] = Field(default_factory=list)
    title: str | None = None
    venue: str | None = None
    year: int | None = None
    doi: str | None = None
    url: str | None = None
    arxiv: str | None = None
    pages: str | None = None

    @field_validator("url")
    @classmethod
    def _http_only(cls, value: str | None) -> str | None:
        if value is not None and safe_url(value) is None:
            raise ValueError(f"url {value[:80]!r}: only http(s) URLs are accepted")
        return value

    def link(self) -> str | None:
        """Where a reader opens it: its URL, else its DOI's or arXiv id's page (http(s) only)."""
        if self.url:
            return safe_url(self.url)
        if self.doi:
            return f"https://doi.org/{self.doi}"
        if self.arxiv:
            return f"https://arxiv.org/abs/{self.arxiv}"
        return None

    def reference(self) -> str:
        """``A, B, C et al. "Title." Venue, Year, pp. X.`` (up to three authors)."""
        who = ", ".join(self.authors[:3]) + (" et al." if len(self.authors) > 3 else "") or "Anonymous"
        who += "" if who.endswith(".") else "."
        pages = f", pp. {self.pages}" if self.pages else ""
        return f'{who} "{self.title or "(untitled)"}." {self.venue or "?"}, {self.year or "n.d."}{pages}.'

    @property
    def missing(self) -> list[str]:
        return [f for f in REQUIRED if not (self.link() if f == "url" else getattr(self, f))]

    @property
    def complete(self) -> bool:
        return not self.missing

    def bibliographic(self) -> Citation:
        """Just the bibliographic fields (a catalog entry or a search hit as a plain Citation)."""
        return Citation.model_validate({f: getattr(self, f) for f in Citation.model_fields})


class CitedClaim(StrictModel):
    """A citation and what it supports: the claim for one strategy, and the evidence for it."""

    citation: Citation
    #: what the source supports, for this strategy (the catalog's checked claim, or the passage)
    claim: str
    #: where the claim was checked (page, section, abstract), in a sentence
    evidence: str = ""
    #: who found it: "catalog", "search:<tool>", "caller" (an MCP client)
    source: str = "catalog"
    #: the source's own text that supports the claim (a PDF page or an abstract), when stored
    passage: str = ""
    page: int | None = None
    #: no passage of the source is stored: the evidence is the curated catalog claim
    catalog_backed: bool = False
    #: who established the bibliographic record of a found citation: the catalog, or the metadata
    #: service it was fetched from (crossref, arxiv, ...); empty: only the paper's own sidecar/PDF
    #: metadata says so, and the citation guard refuses it
    verified_by: str = ""

    @property
    def id(self) -> str:
        return self.citation.id

    @property
    def url(self) -> str | None:
        return self.citation.link()

    def reference(self) -> str:
        return self.citation.reference()

    #: derived on every dump (reports and clients read them), dropped again on load
    DERIVED: ClassVar[tuple[str, ...]] = ("id", "reference", "url")

    @model_serializer(mode="wrap")
    def _with_derived(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {**handler(self), "id": self.id, "reference": self.reference(), "url": self.url}

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in cls.DERIVED}
        return data
