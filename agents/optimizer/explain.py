"""A verdict in a few sentences: the model's, checked against the experiment's numbers, or the rules' reason.

The text is stored with the decision record (and the experiment) and the reports render it as
quoted prose; a sentence citing a number or an id the experiment does not have is dropped.
"""

from __future__ import annotations

from typing import Any

from dftune.agents.context import Context
from dftune.agents.optimizer.expand import enabled
from dftune.agents.optimizer.facts import facts_of
from dftune.agents.reasoner.questions import explain_question
from dftune.core.domain.experiments import Experiment
from dftune.core.domain.run import Decision, TuningState


def experiment_facts(exp: Experiment) -> dict[str, Any]:
    """What the explanation may cite: the experiment's arms, effect, interval, p-value and verdict."""
    c = exp.comparison
    return {
        "iteration": exp.iteration,
        "proposal": exp.proposal_id,
        "strategy": exp.strategy,
        "verdict": exp.verdict,
        "kept": exp.kept,
        "guard_triggered": exp.guard_triggered,
        "reference_median": exp.reference.median,
        "candidate_median": exp.candidate.median if exp.candidate else None,
        "change_pct": c.change_pct if c else None,
        "ci95_pct": list(c.ci95) if c else None,
        "p_value": c.p_value if c else None,
        "replicates": exp.candidate.ok if exp.candidate else None,
        "reason": exp.verdict_reason,
    }


def explain_verdict(state: TuningState, exp: Experiment, ctx: Context) -> tuple[str, Decision] | None:
    """The model's explanation of a decided experiment (the rules: the verdict's own reason), or None
    without a model or with the action off."""
    if not enabled(ctx, "explain"):
        return None
    facts = facts_of(state, spec=ctx.workload_spec)
    j = ctx.reasoner.decide(explain_question(facts, experiment_facts(exp), exp.verdict_reason), facts)
    return j.answer, j.decision
