"""The rules policy: deterministic, offline, and the fallback behind every model answer."""

from __future__ import annotations

from collections.abc import Sequence

from dftune.agents.reasoner.protocol import Choice, Facts, ImpactEstimate
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import Outcome

_LAYER_ORDER = {"L1": 0, "L2": 1, "L3": 2}
#: measured first, then what the knowledge base measured here before, then estimates
_SOURCE_ORDER = {"measured": 0, "kb": 1, "trace model": 2, "model": 2}


def rank_key(p: Proposal) -> tuple[int, float, int, int]:
    """Which open proposal goes first: a known win, then the largest estimated gain, then the cheaper
    layer, then the plan's order (never the name)."""
    return (_SOURCE_ORDER.get(p.app_impact_source, 3), -p.weighted_score, _LAYER_ORDER[p.layer], p.order)


def impact_bound(facts: Facts) -> tuple[float, str]:
    """The most any I/O fix can save, in % of the metric: the I/O that compute does not hide,
    over the lifetimes of the processes doing it (the optimizer's trace facts say it)."""
    if facts.bound_pct is not None:
        return facts.bound_pct, facts.bound_reason
    if facts.io_fraction is not None:
        return 100.0 * facts.io_fraction, f"I/O is {100 * facts.io_fraction:.1f}% of process time"
    return 100.0, "no trace: no bound from the I/O share"


class RulesReasoner:
    """The deterministic policy: the optimizer's measured, KB and trace-model numbers as they are;
    the next proposal by source, estimated gain and cost, never by name."""

    name = "rules"

    def estimate_impacts(self, proposals: Sequence[Proposal], facts: Facts) -> list[ImpactEstimate]:
        """The estimates the optimizer computed from the trace and the KB (the rules add nothing)."""
        return [
            ImpactEstimate(
                proposal_id=p.id,
                app_impact_pct=max(0.0, min(100.0, p.app_impact_pct)),
                reason=p.impact_reason or "no estimate",
            )
            for p in proposals
        ]

    def choose_next(self, options: Sequence[Proposal], facts: Facts) -> Choice:
        if not options:
            raise ValueError("choose_next needs at least one option")
        best = sorted(options, key=rank_key)[0]
        known = "the knowledge base measured a win for it; " if best.app_impact_source == "kb" else ""
        return Choice(
            proposal_id=best.id,
            reason=f"{known}highest weighted score ({best.weighted_score:g}, {best.app_impact_source}) "
            f"among {len(options)} open proposal(s); ties go to the cheaper layer ({best.layer}), "
            "then to the order of the plan",
        )

    def summarize(self, facts: Facts, outcome: Outcome) -> str:
        tried = outcome.experiments
        if not tried:
            return f"{facts.workload}: no experiment ran ({outcome.status_reason or 'nothing to try'})."
        best = ", ".join(f"{w.strategy} ({w.change_pct:+.1f}%)" for w in outcome.wins) or "none"
        trial = ", ".join(f"{w.strategy} ({w.change_pct:+.1f}%)" for w in outcome.pending)
        if trial:  # kept on trial: a person must confirm what the traces could not settle
            best += f"; pending a person's confirmation: {trial}"
        return (
            f"{facts.workload}: {tried} experiment(s) measured; wins kept: {best}; "
            f"overall {outcome.overall_pct:+.1f}% on the metric."
        )
