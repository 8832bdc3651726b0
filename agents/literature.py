"""The literature-searcher agent: a verifiable citation for every candidate strategy.

Search order (dftracer-io-optimization skill): the knowledge base's measured results and the built-in citation
catalog (offline, claims checked against the source), then whatever search the context
provides (the local paper store and remote sources of the literature tools). At most
:data:`MAX_ATTEMPTS` searches per strategy; a strategy still without a citation stays
UNSUPPORTED and is never applied (the citation guard enforces it).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context, EvidenceFn, SearchFn
from dftune.agents.optimizer.prior import kb_prior
from dftune.core.citation import CitedClaim
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import TuningState, Update, log, update
from dftune.tools.catalog import Catalog
from dftune.tools.guards import names_technique

#: "If no paper is found after 10 search attempts, mark the proposal as UNSUPPORTED" (the skill).
MAX_ATTEMPTS = 10


def catalog_citation(strategy_id: str, catalog: Catalog) -> CitedClaim | None:
    """The first verified (citation, claim) pair of the catalog that backs this strategy."""
    if strategy_id not in catalog.strategies:
        return None
    for c, claim in catalog.verified_claims(strategy_id):
        if c.link():
            return CitedClaim(
                citation=c.bibliographic(), claim=claim.claim, evidence=claim.evidence or "", source="catalog"
            )
    return None


def with_passage(ref: CitedClaim, strategy_id: str, ctx: Context) -> CitedClaim:
    """Attach the source's own supporting passage, or mark the claim as catalog-backed."""
    ev = ctx.evidence(strategy_id, ref.id) if ctx.evidence is not None else None
    if ev and not ev.get("catalog_backed") and ev.get("passage"):
        return ref.model_copy(
            update={"passage": str(ev["passage"])[:1200], "page": ev.get("page"), "catalog_backed": False}
        )
    return ref.model_copy(update={"catalog_backed": True})


def find_citation(p: Proposal, ctx: Context, bottlenecks: list[str]) -> tuple[CitedClaim | None, int]:
    """Catalog first, then the context's search (at most MAX_ATTEMPTS tool calls); (citation, attempts)."""
    found = catalog_citation(p.strategy, ctx.catalog)
    if found is not None:
        return with_passage(found, p.strategy, ctx), 0
    if ctx.search is None:
        return None, 0
    hit, attempts = ctx.search(p.strategy, p.strategy_name, bottlenecks[0] if bottlenecks else "read-time")
    if hit is None:
        return None, attempts
    try:
        return CitedClaim.model_validate(hit), attempts
    except ValueError:
        return None, attempts  # an incomplete reference is no citation


def paper_citation(paper: Any) -> dict[str, Any] | None:
    """A search hit (tools.literature Paper) as a CitedClaim dict; None when it is incomplete."""
    if not (paper.complete and paper.passage):
        return None
    where = f"{paper.passage_kind or 'passage'}" + (f", page {paper.page}" if paper.page else "")
    cite = paper.bibliographic().model_copy(update={"id": paper.id or paper.key(), "url": paper.link()})
    return {
        "citation": cite.model_dump(),
        "claim": paper.passage[:600],
        "evidence": f"{where} ({paper.trust} source {paper.source})",
        "source": f"search:{paper.source}",
        "passage": paper.passage[:1200],
        "page": paper.page,
        "verified_by": paper.verified_by or "",
    }


def mentions_technique(strategy_id: str, text: str) -> bool:
    """The citation guard's rule (:func:`tools.guards.names_technique`): the passage names the technique."""
    return names_technique(strategy_id, text)


def acceptable_hit(strategy_id: str, paper: Any) -> bool:
    """A hit that may cite a strategy: a verified record (the catalog, or metadata fetched for its
    DOI/arXiv id; never a sidecar or PDF metadata alone) whose own passage (not its title, which
    the sidecar may set) names the technique."""
    return bool(paper.verified_by) and mentions_technique(strategy_id, paper.passage or "")


def make_evidence() -> EvidenceFn:
    """The literature tools' supporting-passage lookup as an EvidenceFn (local corpus only)."""
    from dftune.tools.literature import supporting_passage

    def run(strategy_id: str, citation_id: str) -> dict[str, Any] | None:
        try:
            ev = supporting_passage(strategy_id, citation_id)
        except (KeyError, ValueError):
            return None
        return ev.model_dump(mode="json") if ev is not None else None

    return run


def make_search(online: bool | None = None) -> SearchFn:
    """The literature tools' search (context papers, local store, then remote when online) as a SearchFn."""
    from dftune.tools.literature import LiteratureSearch

    search = LiteratureSearch(online=online)

    def run(strategy_id: str, strategy_name: str, bottleneck: str) -> tuple[dict[str, Any] | None, int]:
        support = search.find_support(
            bottleneck,
            strategy_id=strategy_id,
            strategy_name=strategy_name,
            accept=lambda p: acceptable_hit(strategy_id, p),
        )
        attempts = len(support.attempts)
        refs = (paper_citation(p) for p in support.papers) if support.status == "supported" else iter(())
        return next((r for r in refs if r is not None), None), attempts

    return run


def literature(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: attach a citation (with its supporting claim) to every candidate, or leave it UNSUPPORTED."""
    ctx = runtime.context
    bottlenecks: list[str] = [b.category for b in state.diagnosis.bottlenecks] if state.diagnosis else []
    ctx.progress("literature", f"citations for {len(state.proposals)} candidate(s)")
    updated: list[Proposal] = []
    citations: dict[str, CitedClaim] = {}
    events = []
    cache: dict[str, tuple[CitedClaim | None, int]] = {}
    for p in state.proposals:
        if p.status not in ("proposed", "manual") or p.citation is not None:
            continue
        if p.strategy not in cache:
            cache[p.strategy] = find_citation(p, ctx, bottlenecks)
        ref, attempts = cache[p.strategy]
        if ref is None:
            events.append(
                log(
                    "literature",
                    f"{p.strategy}: no verifiable citation ({attempts} search attempt(s) beyond the catalog)",
                )
            )
            continue
        citations[ref.id] = ref
        updated.append(p.model_copy(update={"citation": ref}))
    prior = kb_prior(state.system, state.workload, state.software, ctx.kb_db)
    events.append(
        log(
            "literature",
            f"{len(updated)} candidate(s) cited; the KB holds {len(prior.records)} applicable finding(s)",
        )
    )
    return update(proposals=updated, citations=list(citations.values()), kb_prior=prior, events=events)
