"""The rules policy: deterministic, offline, and the fallback behind every model answer."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import Any

from dftune.agents.reasoner.protocol import Choice, Facts, ImpactEstimate
from dftune.agents.state import Proposal

_LAYER_ORDER = {"L1": 0, "L2": 1, "L3": 2}


def _impact_table() -> dict[str, Any]:
    import tomllib

    text = (resources.files("dftune.resources") / "reasoning" / "impact.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def impact_bound(facts: Facts) -> tuple[float, str]:
    """The most any I/O fix can save, in % of the metric: the I/O that is not hidden behind compute."""
    if facts.unoverlapped_fraction is not None:
        return 100.0 * facts.unoverlapped_fraction, (
            f"unoverlapped I/O is {100 * facts.unoverlapped_fraction:.1f}% of job time"
        )
    if facts.io_fraction is not None:
        return 100.0 * facts.io_fraction, f"I/O is {100 * facts.io_fraction:.1f}% of job time"
    return 100.0, "no trace: no bound from the I/O share"


class RulesReasoner:
    """The deterministic policy: measured KB results first, then category efficacy x the I/O bound."""

    name = "rules"

    def __init__(self) -> None:
        self._table = _impact_table()

    def estimate_impacts(self, proposals: Sequence[Proposal], facts: Facts) -> list[ImpactEstimate]:
        bound, why = impact_bound(facts)
        efficacy: dict[str, float] = self._table["efficacy"]
        out = []
        for p in proposals:
            prior = facts.kb_prior.get(p.strategy)
            if prior is not None:
                pct = max(0.0, min(bound, prior))
                out.append(ImpactEstimate(proposal_id=p.id, app_impact_pct=round(pct, 2),
                                          reason=f"the knowledge base measured {prior:+.1f}% for {p.strategy} "
                                                 f"on an earlier run; bounded by {why}"))  # fmt: skip
                continue
            share = efficacy.get(str(p.checklist), self._table["default_efficacy"])
            pct = bound * share
            out.append(ImpactEstimate(
                proposal_id=p.id, app_impact_pct=round(pct, 2),
                reason=f"bounded estimate: {why}; checklist {p.checklist} fixes recover about "
                       f"{100 * share:.0f}% of it ({self._table['source']})",
            ))  # fmt: skip
        return out

    def choose_next(self, options: Sequence[Proposal], facts: Facts) -> Choice:
        if not options:
            raise ValueError("choose_next needs at least one option")
        best = sorted(options, key=lambda p: (-p.weighted_score, _LAYER_ORDER[p.layer], p.id))[0]
        return Choice(proposal_id=best.id,
                      reason=f"highest weighted score ({best.weighted_score:g}) among {len(options)} open "
                             f"proposal(s); ties go to the cheaper layer ({best.layer})")  # fmt: skip

    def summarize(self, facts: Facts, outcome: dict[str, Any]) -> str:
        wins = outcome.get("wins", [])
        tried = outcome.get("experiments", 0)
        if not tried:
            return (
                f"{facts.workload}: no experiment ran ({outcome.get('status_reason') or 'nothing to try'})."
            )
        best = ", ".join(f"{w['strategy']} ({w['change_pct']:+.1f}%)" for w in wins) or "none"
        return (f"{facts.workload}: {tried} experiment(s) measured; wins kept: {best}; "
                f"overall {outcome.get('overall_pct', 0.0):+.1f}% on {outcome.get('metric', 'the metric')}.")  # fmt: skip
