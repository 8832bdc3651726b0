"""The citation guard: no proposal is applied without a verifiable citation.

A catalog strategy passes with a citation that has full metadata (authors, title, venue,
year, a link) and a *verified* claim for this very strategy; a search-found citation passes
with complete metadata and the passage that supports it. Otherwise: UNSUPPORTED.
"""

from __future__ import annotations

from dftune.core.citation import CitedClaim
from dftune.tools.catalog import Catalog, default_catalog
from dftune.tools.guards.decision import GuardDecision


def citation_guard(strategy_id: str, catalog: Catalog | None = None) -> GuardDecision:
    """Pass when a citation with full metadata verifiably supports this strategy."""
    cat = catalog or default_catalog()
    strategy = cat.strategies.get(strategy_id)
    if strategy is None:
        return GuardDecision(guard="citation", passed=False, verdict="unsupported",
                             reason=f"{strategy_id}: not in the strategy catalog")  # fmt: skip
    problems: list[str] = []
    for cid in strategy.citations:
        c = cat.citations.get(cid)
        if c is None:
            problems.append(f"{cid}: unknown citation")
            continue
        missing = c.missing
        verified = [cl for cl in c.claims if cl.strategy == strategy_id and cl.verified]
        if missing:
            problems.append(f"{cid}: missing {', '.join(missing)}")
        elif not verified:
            problems.append(f"{cid}: no verified claim that it supports {strategy_id}")
        else:
            return GuardDecision(
                guard="citation", passed=True,
                reason=f"{strategy_id} is supported by {c.reference()} {c.link()}",
                details={"citation": cid, "claim": verified[0].claim, "url": c.link()},
            )  # fmt: skip
    why = "; ".join(problems) if problems else (strategy.unsupported_reason or "it cites nothing")
    return GuardDecision(guard="citation", passed=False, verdict="unsupported",
                         reason=f"UNSUPPORTED: no verifiable citation for {strategy_id} ({why})")  # fmt: skip


def reference_guard(ref: CitedClaim) -> GuardDecision:
    """A search-found citation passes with complete metadata and a supporting passage."""
    missing = [*ref.citation.missing, *([] if ref.claim.strip() else ["supporting passage"])]
    if missing:
        return GuardDecision(guard="citation", passed=False, verdict="unsupported",
                             reason=f"UNSUPPORTED: the citation {ref.id} lacks {', '.join(missing)}")  # fmt: skip
    return GuardDecision(guard="citation", passed=True, reason=f"supported by {ref.reference()} {ref.url} "
                         f"(found by {ref.source}; passage: {ref.claim[:200]!r})",
                         details={"citation": ref.id, "claim": ref.claim, "url": ref.url, "source": ref.source})  # fmt: skip
