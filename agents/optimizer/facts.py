"""What the reasoner may look at for a judgment, drawn from the state."""

from __future__ import annotations

from dftune.agents.reasoner import Budget, Facts
from dftune.agents.state import TuningState
from dftune.tools.estimates import TraceFacts


def facts_of(state: TuningState, trace: TraceFacts | None = None) -> Facts:
    """The state's facts; with the incumbent's trace numbers, the bound every estimate obeys."""
    a_frac = state.baseline.unoverlapped_io_fraction if state.baseline else None
    history = [{"proposal": e.proposal_id, "verdict": e.verdict,
                "change_pct": e.comparison.change_pct if e.comparison else None} for e in state.experiments]  # fmt: skip
    return Facts(workload=state.workload, diagnosis=state.diagnosis,
                 io_fraction=state.diagnosis.io_fraction if state.diagnosis else None,
                 unoverlapped_fraction=a_frac, kb_prior=state.kb_prior.measured_pct, history=history,
                 budget=Budget(limit=state.token_budget, spent=state.tokens_spent),
                 bound_pct=trace.bound_pct if trace else None,
                 bound_reason=trace.bound_text if trace else "")  # fmt: skip
