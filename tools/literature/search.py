"""The dftracer-io-optimization skill's literature search, in order: papers in the run's context, then the
local corpus (:func:`rag_search`), then arXiv, then the combined remote search.

:class:`LiteratureSearch` keeps the skill's rule: per bottleneck at most ten search attempts;
if none yields a complete citation with a supporting passage, the proposal is UNSUPPORTED
and must not be applied.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from dftune.core import resource
from dftune.tools.literature.corpus import open_store
from dftune.tools.literature.models import Attempt, Paper, SearchResult, Support
from dftune.tools.literature.net import Remote
from dftune.tools.literature.remote import (
    default_remote,
    get_arxiv_paper,
    search_arxiv,
    search_papers_combined,
)
from dftune.vectorstore.store import Hit, PaperStore
from dftune.vectorstore.text import tokens

#: "If no paper is found after 10 search attempts, mark the proposal as UNSUPPORTED" (the skill).
MAX_ATTEMPTS = 10

SystemConfig = str | Mapping[str, Any] | None


@functools.cache
def _query_words() -> dict[str, dict[str, str]]:
    raw = resource.toml("literature/queries.toml")
    return {k: dict(v) for k, v in raw.get("bottleneck", {}).items()}


def _config_words(system_config: SystemConfig) -> str:
    if system_config is None:
        return ""
    if isinstance(system_config, str):
        return system_config
    vals: list[str] = []
    for v in system_config.values():
        if isinstance(v, str | int | float) and not isinstance(v, bool) and str(v) not in ("unknown", ""):
            vals.append(str(v))
        elif isinstance(v, list | tuple):
            vals += [str(x) for x in v if isinstance(x, str | int | float)]
    return " ".join(vals)


def local_query(query: str, bottleneck: str | None = None, system_config: SystemConfig = None) -> str:
    """The text actually searched locally: the query, the bottleneck's words, the system's."""
    parts = [query]
    if bottleneck:
        parts.append(bottleneck.replace("-", " "))
        parts.append(_query_words().get(bottleneck, {}).get("terms", ""))
    parts.append(_config_words(system_config))
    return " ".join(p for p in parts if p)


def remote_query(bottleneck: str, extra: str = "") -> str:
    base = _query_words().get(bottleneck, {}).get("remote") or bottleneck.replace("-", " ")
    return f"{base} {extra}".strip()


def hit_to_paper(h: Hit) -> Paper:
    p, c = h.passage, h.passage.citation
    return Paper(
        title=c.title,
        authors=list(c.authors),
        year=c.year,
        venue=c.venue,
        doi=c.doi,
        url=c.link(),
        arxiv=c.arxiv,
        source="catalog" if c.source == "catalog" else "local",
        id=c.id,
        passage=p.text,
        passage_kind=p.kind,
        page=p.page,
        strategy=p.strategy,
        verified=p.verified,
        trust=p.trust,
        score=h.score,
        verified_by=c.fetched_by,
    )


def rag_search(
    query: str,
    bottleneck: str | None = None,
    system_config: SystemConfig = None,
    *,
    k: int = 5,
    store: PaperStore | None = None,
    mode: Literal["hybrid", "lexical", "vector"] = "hybrid",
) -> SearchResult:
    """Local, free, no network: hybrid search over the catalog and the ingested papers.

    Returns up to ``k`` different papers, each with the passage that matched (page for PDFs,
    the catalog claim or summary otherwise)."""
    st = store or open_store()
    q = local_query(query, bottleneck, system_config)
    hits = st.search(q, k, mode=mode)
    return SearchResult(tool="rag_search", query=q, papers=[hit_to_paper(h) for h in hits])


def _relevant(paper: Paper, query: str) -> bool:
    """A result counts only if its passage shares at least one content word with the query."""
    text = " ".join(x for x in (paper.passage, paper.title, paper.abstract) if x)
    return bool(set(tokens(query)) & set(tokens(text)))


def _context_matches(papers: Iterable[Paper], query: str) -> list[Paper]:
    scored = []
    q = set(tokens(query))
    for p in papers:
        text = " ".join(x for x in (p.title, p.abstract, p.passage) if x)
        overlap = len(q & set(tokens(text)))
        if overlap:
            scored.append((overlap, p.model_copy(update={"source": "context"})))
    return [p for _, p in sorted(scored, key=lambda t: -t[0])]


class LiteratureSearch:
    """One run's literature search: the skill's order, ten attempts per bottleneck at most.

    ``context_papers`` are papers the run already holds (optimization_context.json,
    context_opportunities.json); ``online=False`` skips every remote step at once."""

    def __init__(
        self,
        *,
        context_papers: Sequence[Paper] = (),
        store: PaperStore | None = None,
        remote: Remote | None = None,
        online: bool | None = None,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self.context_papers = list(context_papers)
        self._store = store
        self.remote = remote or default_remote()
        self.online = online
        self.max_attempts = max_attempts
        self._attempts: dict[str, list[Attempt]] = {}

    @property
    def store(self) -> PaperStore:
        if self._store is None:
            self._store = open_store()
        return self._store

    def attempts(self, bottleneck: str, strategy_id: str | None = None) -> list[Attempt]:
        return list(self._attempts.get(f"{bottleneck}|{strategy_id or ''}", []))

    def _plan(
        self, bottleneck: str, strategy_name: str | None, system_config: SystemConfig, queries: Sequence[str]
    ) -> list[tuple[str, str]]:
        words = bottleneck.replace("-", " ")
        topic = strategy_name or words
        plan: list[tuple[str, str]] = [("context", f"{topic} {words}")]
        local = [*queries, f"{topic} {words} optimization", f"{words} optimization"]
        plan += [("rag_search", q) for q in dict.fromkeys(local)]
        plan += [
            ("search_arxiv", f"{remote_query(bottleneck, topic if strategy_name else '')} HPC parallel I/O"),
            ("search_papers_combined", f"{remote_query(bottleneck)} parallel file system tuning"),
            ("search_arxiv_any", f"{topic} I/O performance"),
            ("search_papers_combined", f"{topic} {_config_words(system_config)} I/O".strip()),
            ("get_arxiv_paper", ""),
        ]
        return plan

    def find_support(
        self,
        bottleneck: str,
        *,
        strategy_id: str | None = None,
        strategy_name: str | None = None,
        system_config: SystemConfig = None,
        queries: Sequence[str] = (),
        require_strategy_claim: bool = False,
        accept: Callable[[Paper], bool] | None = None,
    ) -> Support:
        """Search until a complete citation with a supporting passage turns up, at most
        ``max_attempts`` tool calls per (bottleneck, strategy) over the life of this object.

        ``accept`` is the caller's own test of a hit (e.g. "the passage names the technique");
        a hit it refuses does not end the search, the next attempt runs."""
        done = self._attempts.setdefault(f"{bottleneck}|{strategy_id or ''}", [])
        found: list[Paper] = []
        arxiv_ids: list[str] = []
        for tool, query in self._plan(bottleneck, strategy_name, system_config, queries):
            if len(done) >= self.max_attempts:
                break
            if tool == "get_arxiv_paper":
                if not arxiv_ids:
                    continue
                query = arxiv_ids[0]
            res = self._run(tool, query, bottleneck, system_config)
            good = [
                p
                for p in res.papers
                if p.complete and p.passage and _relevant(p, query) and (accept is None or accept(p))
            ]
            if strategy_id and require_strategy_claim:
                good = [p for p in good if p.strategy == strategy_id and p.verified]
            elif strategy_id:
                good.sort(key=lambda p: (p.strategy != strategy_id, not p.verified))
            arxiv_ids += [p.arxiv for p in res.papers if p.arxiv and not p.abstract]
            note = "; ".join(res.notes + res.errors) or None
            done.append(
                Attempt(
                    n=len(done) + 1, tool=tool, query=query, found=len(good), skipped=res.skipped, note=note
                )
            )
            if good:
                found = good
                break
        if found:
            best = found[0]
            return Support(
                bottleneck=bottleneck,
                strategy=strategy_id,
                status="supported",
                papers=found[:5],
                attempts=list(done),
                reason=f"supported by {best.title!r} ({best.source}) after {len(done)} attempt(s)",
            )
        return Support(
            bottleneck=bottleneck,
            strategy=strategy_id,
            status="unsupported",
            attempts=list(done),
            reason=(
                f"UNSUPPORTED: no complete citation with a supporting passage after {len(done)} "
                f"search attempt(s) (limit {self.max_attempts})"
            ),
        )

    def _run(self, tool: str, query: str, bottleneck: str, system_config: SystemConfig) -> SearchResult:
        offline_note = "offline: remote search skipped"
        if tool == "context":
            return SearchResult(
                tool="context", query=query, papers=_context_matches(self.context_papers, query)
            )
        if tool == "rag_search":
            return rag_search(query, bottleneck, system_config, store=self.store)
        if self.online is False:
            return SearchResult(tool=tool, query=query, skipped=True, notes=[offline_note])
        if tool == "search_arxiv":
            return search_arxiv(query, 5, "cs.DC", remote=self.remote)
        if tool == "search_arxiv_any":
            return search_arxiv(query, 5, None, remote=self.remote)
        if tool == "search_papers_combined":
            return search_papers_combined(query, 5, remote=self.remote)
        if tool == "get_arxiv_paper":
            return get_arxiv_paper(query, remote=self.remote)
        raise ValueError(f"unknown literature tool {tool!r}")
