"""The 12-category checklist (dftracer-io-optimization skill): a verdict for EACH category, every loop."""

from __future__ import annotations

from dftune.core.domain.experiments import ChecklistVerdict, Experiment
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import TuningState
from dftune.core.vocabulary import CHECKLIST


def _change_of(e: Experiment) -> float:
    return e.comparison.change_pct if e.comparison else 0.0


def checklist_verdicts(state: TuningState) -> list[ChecklistVerdict]:
    """A verdict for EACH of the 12 categories, every loop, with a concrete reason (the skill's rule)."""
    diag_list = {c.number: c for c in state.diagnosis.checklist} if state.diagnosis else {}
    by_cat: dict[int, list[Proposal]] = {}
    for p in state.proposals:
        by_cat.setdefault(p.checklist, []).append(p)
    measured = {e.proposal_id: e for e in state.experiments}
    out = []
    for number, name in CHECKLIST.items():
        props = by_cat.get(number, [])
        done = [p for p in props if p.id in measured and measured[p.id].verdict]
        known = [p for p in props if p.status == "known"]  # measured by an earlier run (the KB)
        if done or known:
            parts = [
                f"{p.id}: {measured[p.id].verdict} ({_change_of(measured[p.id]):+.1f}%, "
                f"{p.citation.id if p.citation else 'uncited'})"
                for p in done
            ]
            parts += [f"{p.id}: {p.reason}" for p in known]
            out.append(
                ChecklistVerdict(
                    number=number,
                    category=name,
                    verdict="applied_measured",
                    reason="; ".join(parts),
                    strategies=[p.strategy for p in [*done, *known]],
                )
            )
            continue
        open_ = [p for p in props if p.status == "proposed"]
        if open_:
            out.append(
                ChecklistVerdict(
                    number=number,
                    category=name,
                    verdict="applicable_not_measured",
                    reason=f"{len(open_)} cited proposal(s) not measured yet: "
                    + ", ".join(p.id for p in open_),
                    strategies=[p.strategy for p in open_],
                )
            )
            continue
        if props:
            reasons = "; ".join(f"{p.id}: {p.status} ({p.reason})" for p in props)
            verdict = (
                "applicable_not_measured" if any(p.status == "manual" for p in props) else "not_applicable"
            )
            out.append(
                ChecklistVerdict(
                    number=number,
                    category=name,
                    verdict=verdict,
                    reason=reasons,
                    strategies=[p.strategy for p in props],
                )
            )
            continue
        d = diag_list.get(number)
        reason = d.reason if d else "no diagnosed bottleneck maps to it"
        out.append(
            ChecklistVerdict(
                number=number, category=name, verdict=d.verdict if d else "not_applicable", reason=reason
            )
        )
    return out
