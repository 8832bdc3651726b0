"""The typed questions a reasoner answers: what is asked, how an answer is checked, what the rules say.

A :class:`Question` is everything one judgment needs, whoever answers it: the answer schema (the
one tool the model must call), the prompt, ``accept`` (checks a model's answer and turns it into
the result; a ``ValueError`` sends the reason back to the model) and ``rules`` (the deterministic
answer: offline, and the fallback). A new kind of judgment is a new builder here plus its rules
answer; :mod:`.llm` asks any of them the same way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from typing import Any, TypeVar

from dftune.agents.reasoner.protocol import (
    Accepted,
    Choice,
    Facts,
    ImpactEstimate,
    ImpactEstimates,
    Question,
    Summary,
)
from dftune.agents.reasoner.rules import RulesReasoner, impact_bound
from dftune.agents.reasoner.summary import check_summary
from dftune.agents.state import Proposal

A = TypeVar("A")


def load_prompt(agent: str, name: str) -> str:
    """Prompts are files: ``prompts/<agent>/<name>.md``."""
    return (resources.files("dftune.prompts") / agent / f"{name}.md").read_text(encoding="utf-8")


def estimate_question(
    policy: RulesReasoner, proposals: Sequence[Proposal], facts: Facts
) -> Question[list[ImpactEstimate]]:
    """How much each proposal may save: one bounded estimate per id, capped at the I/O bound."""
    bound, why = impact_bound(facts)
    ids = {p.id for p in proposals}

    def rules() -> list[ImpactEstimate]:
        return policy.estimate_impacts(proposals, facts)

    def accept(ans: ImpactEstimates) -> Accepted[list[ImpactEstimate]]:
        got = [e.proposal_id for e in ans.estimates]
        if sorted(got) != sorted(ids):
            raise ValueError(f"give exactly one estimate for each of {sorted(ids)} (got {sorted(got)})")
        capped = [e.proposal_id for e in ans.estimates if e.app_impact_pct > bound]
        out = [e.model_copy(update={"app_impact_pct": round(min(e.app_impact_pct, bound), 2),
                                    "reason": f"{e.reason} (the model's estimate, capped at {bound:.1f}%: {why})"})
               for e in ans.estimates]  # fmt: skip
        return Accepted(out, [f"capped at the I/O bound {bound:.1f}%: {', '.join(capped)}"] if capped else [])

    prompt = load_prompt("optimizer", "estimate_impacts").format(
        facts=facts_json(facts), bound=f"{bound:.2f}", bound_reason=why,
        proposals=json.dumps([option(p) for p in proposals], indent=1),
        rules=json.dumps([e.model_dump() for e in rules()], indent=1),
    )  # fmt: skip
    return Question("estimate_impacts", ImpactEstimates, prompt, rules, accept,
                    brief=lambda es: f"{len(es)} estimate(s)")  # fmt: skip


def choose_question(policy: RulesReasoner, options: Sequence[Proposal], facts: Facts) -> Question[Choice]:
    """The next proposal to measure, among the offered ids only."""
    ids = {p.id for p in options}

    def accept(ans: Choice) -> Accepted[Choice]:
        if ans.proposal_id not in ids:
            raise ValueError(f"{ans.proposal_id!r} is not one of the offered ids {sorted(ids)}")
        return Accepted(ans)

    prompt = load_prompt("optimizer", "choose_next").format(
        facts=facts_json(facts), options=json.dumps([option(p) for p in options], indent=1)
    )
    return Question("choose_next", Choice, prompt, lambda: policy.choose_next(options, facts), accept,
                    brief=lambda c: c.proposal_id)  # fmt: skip


def summary_question(policy: RulesReasoner, facts: Facts, outcome: dict[str, Any]) -> Question[str]:
    """The run's summary: every number and proposal it cites is checked against what the model was given."""
    given = {"facts": json.loads(facts_json(facts)), "outcome": json.loads(json.dumps(outcome, default=str))}

    def accept(ans: Summary) -> Accepted[str]:
        checked = check_summary(
            ans.text, given, wins={str(w.get("proposal")) for w in outcome.get("wins", [])}
        )
        if not checked.kept:
            raise ValueError("no sentence of the summary holds up: " + "; ".join(checked.dropped)[:400]
                             + ". Cite only the numbers and proposal ids given")  # fmt: skip
        return Accepted(checked.text, [f"summary sentence dropped: {d}" for d in checked.dropped])

    prompt = load_prompt("optimizer", "summarize").format(
        facts=facts_json(facts), outcome=json.dumps(outcome, indent=1, default=str)
    )
    return Question("summarize", Summary, prompt, lambda: policy.summarize(facts, outcome), accept,
                    brief=lambda t: f"{len(t)} characters")  # fmt: skip


def option(p: Proposal) -> dict[str, Any]:
    return {"id": p.id, "strategy": p.strategy, "layer": p.layer, "description": p.description,
            "app_impact_pct": p.app_impact_pct, "system_impact_pct": p.system_impact_pct,
            "weighted_score": p.weighted_score, "privilege": p.privilege}  # fmt: skip


def facts_json(facts: Facts) -> str:
    diag = facts.diagnosis
    brief = {
        "workload": facts.workload, "io_fraction": facts.io_fraction,
        "unoverlapped_fraction": facts.unoverlapped_fraction,
        "bottlenecks": [{"category": b.category, "score": b.score, "evidence": b.evidence}
                        for b in (diag.bottlenecks if diag else [])][:8],
        "shape": diag.shape if diag else None, "kb_prior_pct": facts.kb_prior, "history": facts.history,
    }  # fmt: skip
    return json.dumps(brief, indent=1, default=str)
