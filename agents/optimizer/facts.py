"""What the reasoner may look at for a judgment, drawn from the state."""

from __future__ import annotations

from dftune.agents.reasoner import Budget, Facts
from dftune.agents.state import TuningState


def facts_of(state: TuningState) -> Facts:
    a_frac = state.baseline.unoverlapped_io_fraction if state.baseline else None
    history = [{"proposal": e.proposal_id, "verdict": e.verdict,
                "change_pct": e.comparison.change_pct if e.comparison else None} for e in state.experiments]  # fmt: skip
    return Facts(workload=state.workload, diagnosis=state.diagnosis,
                 io_fraction=state.diagnosis.io_fraction if state.diagnosis else None,
                 unoverlapped_fraction=a_frac, kb_prior=state.kb_prior.measured_pct, history=history,
                 budget=Budget(limit=state.token_budget, spent=state.tokens_spent))  # fmt: skip
