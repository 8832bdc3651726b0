"""The typed questions a reasoner answers: what is asked, how an answer is checked, what the rules say.

A :class:`Question` is everything one judgment needs, whoever answers it: the answer schema (the
one tool the model must call), the prompt, ``accept`` (checks a model's answer and turns it into
the result; a ``ValueError`` sends the reason back to the model) and ``rules`` (the deterministic
answer: offline, and the fallback). A new kind of judgment is a new builder here plus its rules
answer; :mod:`.llm` asks any of them the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any, TypeVar

from dftune.agents.reasoner.protocol import (
    Accepted,
    Choice,
    Explanation,
    Facts,
    ImpactEstimate,
    ImpactEstimates,
    KnobProposal,
    KnobValues,
    L2Setting,
    L2Settings,
    Pace,
    PatchDraft,
    PatchDrafts,
    Question,
    Summary,
)
from dftune.agents.reasoner.rules import RulesReasoner, impact_bound
from dftune.agents.reasoner.summary import check_summary
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import Outcome

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
        out = [
            e.model_copy(
                update={
                    "app_impact_pct": round(min(e.app_impact_pct, bound), 2),
                    "reason": f"{e.reason} (the model's estimate, capped at {bound:.1f}%: {why})",
                }
            )
            for e in ans.estimates
        ]
        return Accepted(out, [f"capped at the I/O bound {bound:.1f}%: {', '.join(capped)}"] if capped else [])

    prompt = load_prompt("optimizer", "estimate_impacts").format(
        facts=facts_json(facts),
        bound=f"{bound:.2f}",
        bound_reason=why,
        proposals=json.dumps([option(p) for p in proposals], indent=1),
        rules=json.dumps([e.model_dump() for e in rules()], indent=1),
    )
    return Question(
        "estimate_impacts", ImpactEstimates, prompt, rules, accept, brief=lambda es: f"{len(es)} estimate(s)"
    )


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
    return Question(
        "choose_next",
        Choice,
        prompt,
        lambda: policy.choose_next(options, facts),
        accept,
        brief=lambda c: c.proposal_id,
    )


def summary_question(policy: RulesReasoner, facts: Facts, outcome: Outcome) -> Question[str]:
    """The run's summary: every number and proposal it cites is checked against what the model was given."""
    given = {"facts": json.loads(facts_json(facts)), "outcome": outcome.model_dump(mode="json")}

    def accept(ans: Summary) -> Accepted[str]:
        checked = check_summary(ans.text, given, wins={w.proposal for w in outcome.wins})
        if not checked.kept:
            raise ValueError(
                "no sentence of the summary holds up: "
                + "; ".join(checked.dropped)[:400]
                + ". Cite only the numbers and proposal ids given"
            )
        return Accepted(checked.text, [f"summary sentence dropped: {d}" for d in checked.dropped])

    prompt = load_prompt("optimizer", "summarize").format(
        facts=facts_json(facts), outcome=outcome.model_dump_json(indent=1)
    )
    return Question(
        "summarize",
        Summary,
        prompt,
        lambda: policy.summarize(facts, outcome),
        accept,
        brief=lambda t: f"{len(t)} characters",
    )


def option(p: Proposal) -> dict[str, Any]:
    return {
        "id": p.id,
        "strategy": p.strategy,
        "layer": p.layer,
        "description": p.description,
        "app_impact_pct": p.app_impact_pct,
        "system_impact_pct": p.system_impact_pct,
        "weighted_score": p.weighted_score,
        "privilege": p.privilege,
    }


#: the most characters the facts may take in a prompt (the rest is cut, and the prompt says so)
FACTS_CHARS = 12_000


def facts_json(facts: Facts) -> str:
    """The facts as the model reads them, bounded in size (lists are cut in :mod:`optimizer.facts`)."""
    diag = facts.diagnosis
    left = facts.budget.limit - facts.budget.spent
    brief = {
        "workload": facts.workload,
        "description": facts.description,
        "metric": facts.metric,
        "direction": "lower is better" if facts.lower_is_better else "higher is better",
        "io_fraction": facts.io_fraction,
        "unoverlapped_fraction": facts.unoverlapped_fraction,
        "bottlenecks": [
            {"category": b.category, "score": b.score, "evidence": b.evidence}
            for b in (diag.bottlenecks if diag else [])
        ][:8],
        "shape": diag.shape if diag else None,
        "views": facts.views,
        "citations": facts.citations,
        "kb_prior_pct": facts.kb_prior,
        "kb_records": facts.kb_records,
        "history": facts.history,
        "budget_left": {
            "experiments": facts.experiments_left,
            "tokens": left,
            "wall_clock_s": facts.wall_clock_left_s,
            "replicates_per_arm": facts.replicates,
        },
    }
    text = json.dumps(brief, indent=1, default=str)
    if len(text) > FACTS_CHARS:
        text = text[:FACTS_CHARS] + f"\n... cut: {len(text) - FACTS_CHARS} more characters of facts not shown"
    return text


# --------------------------------------------------------------------------- the model's actions


def _built(items: Sequence[Any], build: Callable[[Any], Proposal], what: str) -> list[Proposal]:
    """Every item of an answer through its builder; the first that does not hold sends the answer back."""
    out: list[Proposal] = []
    for i, item in enumerate(items):
        try:
            p = build(item)
        except ValueError as exc:
            raise ValueError(f"{what} {i + 1}: {exc}") from None
        if any(p.id == q.id for q in out):
            raise ValueError(f"{what} {i + 1} repeats {p.id}")
        out.append(p)
    return out


def _ids(ps: list[Proposal]) -> str:
    return ", ".join(p.id for p in ps) or "none"


def _proposing(
    name: str,
    schema: type[Any],
    items: str,
    what: str,
    build: Callable[[Any], Proposal],
    facts: Facts,
    **shown: Any,
) -> Question[list[Proposal]]:
    """A question whose answer is new proposals (``schema.<items>``, each built and checked by
    ``build``); the rules propose none. ``shown`` fills the prompt (JSON unless already text)."""

    def accept(ans: Any) -> Accepted[list[Proposal]]:
        return Accepted(_built(getattr(ans, items), build, what))

    fields = {k: v if isinstance(v, str) else json.dumps(v, indent=1) for k, v in shown.items()}
    prompt = load_prompt("optimizer", name).format(facts=facts_json(facts), **fields)
    return Question(name, schema, prompt, lambda: [], accept, brief=_ids)


def knob_value_question(
    knobs: list[dict[str, Any]], build: Callable[[KnobProposal], Proposal], facts: Facts
) -> Question[list[Proposal]]:
    """New values of ranged knobs (inside the declared range, not in the value list). Rules: none."""
    return _proposing("knob_values", KnobValues, "values", "value", build, facts, knobs=knobs)


def l2_question(
    strategies: list[dict[str, Any]], build: Callable[[L2Setting], Proposal], facts: Facts
) -> Question[list[Proposal]]:
    """Catalog L2 settings with values the catalog declares. Rules: none (the plan has the catalog's own)."""
    return _proposing("l2_settings", L2Settings, "settings", "setting", build, facts, strategies=strategies)


def draft_question(
    recommendations: list[dict[str, Any]], source: str, build: Callable[[PatchDraft], Proposal], facts: Facts
) -> Question[list[Proposal]]:
    """Source patches for manual recommendations, each applying
    cleanly. Rules: none (the rules write no code)."""
    return _proposing(
        "draft_patch",
        PatchDrafts,
        "patches",
        "patch",
        build,
        facts,
        recommendations=recommendations,
        source=source,
    )


def pace_question(facts: Facts, replicates: int, most: int) -> Question[Pace]:
    """Go on or stop, and the next experiment's replicates (``replicates`` to ``most``). Rules: go on."""

    def rules() -> Pace:
        return Pace(
            action="continue",
            replicates=None,
            reason=f"the rules measure until the budget or the proposals run out, {replicates} replicates",
        )

    def accept(ans: Pace) -> Accepted[Pace]:
        if ans.replicates is not None and not replicates <= ans.replicates <= most:
            raise ValueError(f"replicates must be between {replicates} and {most} (got {ans.replicates})")
        return Accepted(
            ans.model_copy(update={"replicates": None if ans.replicates == replicates else ans.replicates})
        )

    prompt = load_prompt("optimizer", "pace").format(
        facts=facts_json(facts), replicates=replicates, most=most
    )
    return Question(
        "pace",
        Pace,
        prompt,
        rules,
        accept,
        brief=lambda a: a.action + (f", {a.replicates} replicates" if a.replicates else ""),
    )


def explain_question(facts: Facts, experiment: dict[str, Any], rules_text: str) -> Question[str]:
    """A short explanation of one verdict; every number and id it cites is checked against the experiment."""
    given = {"experiment": json.loads(json.dumps(experiment, default=str))}

    def accept(ans: Explanation) -> Accepted[str]:
        checked = check_summary(
            ans.text, given, wins={str(experiment["proposal"])} if experiment.get("kept") else set()
        )
        if not checked.kept:
            raise ValueError(
                "no sentence of the explanation holds up: "
                + "; ".join(checked.dropped)[:400]
                + ". Cite only the numbers and ids of this experiment"
            )
        return Accepted(checked.text[:600], [f"explanation sentence dropped: {d}" for d in checked.dropped])

    prompt = load_prompt("optimizer", "explain_verdict").format(
        facts=facts_json(facts), experiment=json.dumps(experiment, indent=1, default=str)
    )
    return Question(
        "explain_verdict", Explanation, prompt, lambda: rules_text, accept, brief=lambda t: t[:300]
    )
