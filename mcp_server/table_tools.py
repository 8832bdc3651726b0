"""The proposal table (dftracer-io-optimization skill) as a tool: uncited rows are an error, never dropped."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from dftune.mcp_server.registry import Toolbox, _In
from dftune.tools.report.table import PROPOSAL_COLUMNS, proposal_markdown

box = Toolbox()


class CitationIn(_In):
    authors: list[str] = Field(min_length=1, description="Authors, as printed.")
    title: str = Field(min_length=1, description="Title of the paper or page.")
    venue: str = Field(min_length=1, description="Journal, conference or 'arXiv preprint arXiv:NNNN'.")
    year: int = Field(ge=1900, le=2100, description="Publication year.")
    url: str = Field(pattern=r"^https?://\S+$", description="arXiv, DOI or publisher URL.")
    claim: str = Field("", description="The passage that supports the proposal.")


class ProposalRowIn(_In):
    strategy: str = Field(min_length=1, description="Strategy id, e.g. 'l1.dataloader_workers'.")
    description: str = Field(min_length=1, description="Description of the optimization.")
    app_impact_pct: float = Field(
        description="% of application wall time saved (measured or bounded estimate)."
    )
    app_impact_source: Literal["measured", "kb", "trace model", "model", "n/a"] = Field(
        "model", description="Where App Impact comes from (model: the caller's estimate)."
    )
    system_impact_pct: float = Field(0.0, description="% change of throughput/bandwidth; 0 if not measured.")
    system_impact_source: Literal["measured", "kb", "trace model", "model", "n/a"] = Field(
        "model", description="Where System Impact comes from (n/a: the change does not act on it)."
    )
    layer: Literal["L1", "L2", "L3"] | None = Field(
        None, description="Default: the catalog's, else the id prefix."
    )
    citation_id: str | None = Field(
        None, description="A citation id of dftune's catalog (instead of citation)."
    )
    citation: CitationIn | None = Field(None, description="A full citation (instead of citation_id).")


class ProposalTableIn(_In):
    rows: list[ProposalRowIn] = Field(min_length=1, description="The proposals; every one must be cited.")


def _proposal(i: int, row: ProposalRowIn) -> Any:
    """The optimizer's proposal for a row; an uncited or unresolvable row stops the table."""
    from dftune.agents.optimizer import cited_proposal
    from dftune.core.citation import Citation, CitedClaim
    from dftune.tools.catalog import default_catalog

    claim = None
    if row.citation is not None:
        c = row.citation
        cite = Citation(id=c.url, authors=c.authors, title=c.title, venue=c.venue, year=c.year, url=c.url)
        claim = CitedClaim(citation=cite, claim=c.claim, evidence=c.claim, source="caller")
    return cited_proposal(
        i,
        strategy=row.strategy,
        description=row.description,
        app_impact_pct=row.app_impact_pct,
        app_impact_source=row.app_impact_source,
        system_impact_pct=row.system_impact_pct,
        system_impact_source=row.system_impact_source,
        catalog=default_catalog(),
        citation=claim,
        citation_id=row.citation_id,
        layer=row.layer,
    )


@box.tool(
    "opt_proposal_table",
    ProposalTableIn,
    """Render proposals as the skill's table: #, Strategy, Description of
       Optimization, App Impact, System Impact, Weighted Score
       (50/50 of app and system impact), sorted by score
       descending, each row with its citation. A row without
       a verifiable citation is rejected with an error.""",
)
def opt_proposal_table_tool(p: ProposalTableIn) -> dict[str, Any]:
    """Uncited proposals never reach a person: the table refuses them instead of dropping them quietly."""
    from dftune.agents.optimizer import proposal_table

    rows = proposal_table([_proposal(i, r) for i, r in enumerate(p.rows, 1)])
    return {
        "columns": list(PROPOSAL_COLUMNS),
        "rows": [r.model_dump(by_alias=True) for r in rows],
        "markdown": "\n".join(proposal_markdown(rows)),
    }
