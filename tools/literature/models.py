"""Records the literature tools return: papers with their evidence, and what each search did."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from dftune.core.citation import Citation, safe_url
from dftune.core.model import StrictModel

PaperSource = Literal["context", "catalog", "local", "arxiv", "semantic_scholar", "openalex", "crossref"]
REMOTE_SOURCES = frozenset({"arxiv", "semantic_scholar", "openalex", "crossref"})


class Paper(Citation):
    """One paper (or documentation page) with the passage that made it come back.

    A :class:`Citation` (``id`` is the catalog or local-store citation id when the paper is
    known locally, else empty). ``passage`` is text from the source (or our catalog claim):
    data to quote, never an instruction."""

    model_config = ConfigDict(extra="forbid")

    pdf_url: str | None = None
    abstract: str | None = None
    source: PaperSource
    passage: str | None = None
    passage_kind: Literal["summary", "claim", "page", "abstract"] | None = None
    page: int | None = None
    strategy: str | None = None
    verified: bool | None = None
    trust: Literal["curated", "untrusted"] = "untrusted"
    score: float | None = None
    #: who established the bibliographic record: "catalog", or the metadata service it was fetched
    #: from; None when only the paper's own sidecar/PDF metadata says so (never enough to cite)
    verified_by: str | None = None

    @model_validator(mode="after")
    def _fetched_records_are_verified(self) -> Paper:
        """A hit straight from a metadata service is that service's record."""
        if self.verified_by is None and self.source in REMOTE_SOURCES:
            self.verified_by = self.source
        return self

    @field_validator("url", "pdf_url", mode="before")
    @classmethod
    def _drop_unsafe_url(cls, value: Any) -> Any:
        """A remote service's odd link (not http(s)) is left out, never passed on."""
        return safe_url(value) if isinstance(value, str) else value

    def key(self) -> str:
        """Identity across sources: DOI, then arXiv id, then the normalized title."""
        if self.doi:
            return "doi:" + self.doi.lower()
        if self.arxiv:
            return "arxiv:" + re.sub(r"v\d+$", "", self.arxiv)
        return "title:" + re.sub(r"[^a-z0-9]+", " ", (self.title or "").lower()).strip()

    def to_json(self) -> dict[str, Any]:
        return {
            **self.model_dump(mode="json"),
            "citation_id": self.id or None,
            "url": self.link(),
            "missing": self.missing,
            "complete": self.complete,
        }


class SearchResult(StrictModel):
    """What one tool call returned; ``skipped`` when it did not run (offline, capped)."""

    tool: str
    query: str
    papers: list[Paper] = Field(default_factory=list)
    skipped: bool = False
    notes: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "query": self.query,
            "skipped": self.skipped,
            "notes": self.notes,
            "errors": self.errors,
            "papers": [p.to_json() for p in self.papers],
        }


class Attempt(StrictModel):
    n: int
    tool: str
    query: str
    found: int
    skipped: bool = False
    note: str | None = None


class Support(StrictModel):
    """The outcome of searching for a bottleneck's citation: at most ten attempts, then
    UNSUPPORTED (the proposal is not applied)."""

    bottleneck: str
    strategy: str | None = None
    status: Literal["supported", "unsupported"]
    papers: list[Paper] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "bottleneck": self.bottleneck,
            "strategy": self.strategy,
            "status": self.status,
            "reason": self.reason,
            "papers": [p.to_json() for p in self.papers],
            "attempts": [a.model_dump(mode="json") for a in self.attempts],
        }
