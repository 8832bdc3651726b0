"""The dftracer-io-optimization skill's proposal table: cited proposals only, sorted by the 50/50 score.

Also builds a proposal from a row a client hands in (the MCP ``opt_proposal_table`` tool): the
row must carry a verifiable citation (a catalog id, or authors/title/venue/year/URL), or it
is refused with :class:`UncitedProposal`, never silently dropped.
"""

from __future__ import annotations

from dftune.core.citation import CitedClaim
from dftune.core.domain.proposals import Change, Proposal
from dftune.core.domain.run import ProposalRow
from dftune.core.errors import DftuneError
from dftune.tools.catalog import Catalog


class UncitedProposal(DftuneError):
    """A proposal without a verifiable citation (or with one that cannot be resolved)."""


#: measured rows first, then what the KB measured here, then estimates; what nobody will run last
_SOURCE_RANK = {"measured": 0, "kb": 1}
_STATUS_RANK = {"measured": 0, "known": 0, "proposed": 0, "manual": 1, "failed": 2, "declined": 2}
_LAYER_RANK = {"L1": 0, "L2": 1, "L3": 2}


def table_order(p: Proposal) -> tuple[int, int, float, int, int]:
    """Rows by where their number comes from, then by whether they can still run, then by the
    weighted score, then by cost (L1 < L2 < L3), then by the plan's order: never by name."""
    return (
        _SOURCE_RANK.get(p.app_impact_source, 2),
        _STATUS_RANK.get(p.status, 3),
        -p.weighted_score,
        _LAYER_RANK[p.layer],
        p.order,
    )


def proposal_table(proposals: list[Proposal]) -> list[ProposalRow]:
    """The skill's table: #, Strategy, Description, App Impact, System Impact, Weighted Score (sorted)."""
    rows = [
        p
        for p in proposals
        if p.status in ("proposed", "measured", "known", "declined", "failed", "manual")
        and p.citation is not None
    ]
    rows.sort(key=table_order)
    return [
        ProposalRow(
            number=i,
            id=p.id,
            strategy=p.strategy,
            description=p.description,
            app_impact_pct=p.app_impact_pct,
            app_impact_source=p.app_impact_source,
            system_impact_pct=p.system_impact_pct,
            system_impact_source=p.system_impact_source,
            weighted_score=p.weighted_score,
            status=p.status,
            layer=p.layer,
            impact_reason=p.impact_reason,
            system_reason=p.system_reason,
            citation=p.citation.reference() if p.citation else None,
            url=p.citation.url if p.citation else None,
        )
        for i, p in enumerate(rows, 1)
    ]


def cited_proposal(
    n: int,
    *,
    strategy: str,
    description: str,
    app_impact_pct: float,
    app_impact_source: str,
    system_impact_pct: float,
    system_impact_source: str,
    catalog: Catalog,
    citation: CitedClaim | None = None,
    citation_id: str | None = None,
    layer: str | None = None,
) -> Proposal:
    """Proposal ``p<n>`` from one row; a row without a resolvable citation is refused."""
    where = f"row {n} ({strategy})"
    if citation is not None and citation_id is not None:
        raise UncitedProposal(f"{where}: give citation or citation_id, not both")
    if citation_id is not None:
        known = catalog.citations.get(citation_id)
        if known is None or known.link() is None:
            raise UncitedProposal(
                f"{where}: citation_id {citation_id!r} is not a catalog citation with a URL"
            )
        claims = known.claims_for(strategy)
        citation = CitedClaim(
            citation=known.bibliographic(),
            claim=claims[0].claim if claims else known.summary or "",
            evidence=claims[0].evidence or "catalog" if claims else "catalog",
            source="catalog",
        )
    if citation is None:
        raise UncitedProposal(
            f"{where} has no citation: every proposal needs a verifiable citation (authors, "
            "title, venue, year, URL); search for one (rag_search, search_arxiv) or leave the "
            "proposal out as UNSUPPORTED"
        )
    s = catalog.strategies.get(strategy)
    prefix = strategy.split(".", 1)[0].upper()
    chosen = layer or (s.layer if s is not None else prefix if prefix in ("L1", "L2", "L3") else None)
    if chosen not in ("L1", "L2", "L3"):
        raise UncitedProposal(f"{where}: unknown strategy; give its layer (L1, L2 or L3)")
    return Proposal.model_validate(
        {
            "id": f"p{n}",
            "strategy": strategy,
            "strategy_name": s.name if s else strategy,
            "layer": chosen,
            "checklist": s.checklist if s else 0,
            "description": description,
            "change": Change(kind="manual", instructions=description),
            "app_impact_pct": app_impact_pct,
            "app_impact_source": app_impact_source,
            "system_impact_pct": system_impact_pct,
            "system_impact_source": system_impact_source,
            "citation": citation,
        }
    )
