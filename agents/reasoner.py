"""Every judgment of the tuning graph goes through one :class:`Reasoner`.

Three judgments: which proposal to try next, how much each proposal may gain (impact
estimates), and the wording of the run's summary. :class:`RulesReasoner` decides them
deterministically from data and works offline. :class:`LLMReasoner` asks a langchain-core
chat model for a typed answer (pydantic, through tool calling), re-asks a bounded number of
times when the answer is invalid, keeps within a token budget, and otherwise falls back to
the rules. The model only ever chooses among the typed options it is given (proposal ids,
bounded numbers); it never writes a command.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dftune.agents.state import Proposal
from dftune.core.errors import DftuneError
from dftune.tools.diagnose.engine import Diagnosis

#: Re-asks after an invalid answer before the rules decide instead.
MAX_REASKS = 2
DEFAULT_TOKEN_BUDGET = 200_000


class ReasonerError(DftuneError):
    """The reasoner cannot be set up (unknown provider, missing package): one line."""


# --------------------------------------------------------------------------- typed answers


class Choice(BaseModel):
    """Which proposal to try next, and why."""

    model_config = ConfigDict(extra="forbid")
    proposal_id: str = Field(description="id of one of the offered proposals, exactly as given")
    reason: str = Field(description="one or two sentences a performance engineer would accept")


class ImpactEstimate(BaseModel):
    """A bounded estimate of what one proposal may save."""

    model_config = ConfigDict(extra="forbid")
    proposal_id: str
    app_impact_pct: float = Field(ge=0.0, le=100.0)
    reason: str


class ImpactEstimates(BaseModel):
    model_config = ConfigDict(extra="forbid")
    estimates: list[ImpactEstimate]


class Summary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="a short plain-text summary of the run for its report")


@dataclass
class Facts:
    """What a judgment may look at: the diagnosis and the measured history of this run."""

    workload: str
    diagnosis: Diagnosis | None
    io_fraction: float | None
    unoverlapped_fraction: float | None
    kb_prior: dict[str, float] = field(default_factory=dict)
    #: the bound of every estimate: unoverlapped I/O over process time (%), and why
    bound_pct: float | None = None
    bound_reason: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)


class Reasoner(Protocol):
    name: str

    def estimate_impacts(self, proposals: Sequence[Proposal], facts: Facts) -> list[ImpactEstimate]: ...

    def choose_next(self, options: Sequence[Proposal], facts: Facts) -> Choice: ...

    def summarize(self, facts: Facts, outcome: dict[str, Any]) -> str: ...


# --------------------------------------------------------------------------- rules


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
        return [ImpactEstimate(proposal_id=p.id, app_impact_pct=max(0.0, min(100.0, p.app_impact_pct)),
                               reason=p.impact_reason) for p in proposals]  # fmt: skip

    def choose_next(self, options: Sequence[Proposal], facts: Facts) -> Choice:
        if not options:
            raise ValueError("choose_next needs at least one option")
        best = sorted(options, key=rank_key)[0]
        known = "the knowledge base measured a win for it; " if best.app_impact_source == "kb" else ""
        return Choice(proposal_id=best.id,
                      reason=f"{known}highest weighted score ({best.weighted_score:g}, {best.app_impact_source}) "
                             f"among {len(options)} open proposal(s); ties go to the cheaper layer ({best.layer}), "
                             "then to the order of the plan")  # fmt: skip

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


# --------------------------------------------------------------------------- LLM


def load_prompt(agent: str, name: str) -> str:
    """Prompts are files: ``prompts/<agent>/<name>.md``."""
    return (resources.files("dftune.prompts") / agent / f"{name}.md").read_text(encoding="utf-8")


PROVIDERS = ("anthropic", "openai")


def parse_model_spec(spec: str) -> tuple[str, str]:
    """``PROVIDER:MODEL`` -> (provider, model), with a one-line error for anything else."""
    provider, _, model = spec.partition(":")
    if not model:
        raise ReasonerError(f"--model {spec!r}: expected rules or PROVIDER:MODEL (anthropic:..., openai:...)")
    if provider not in PROVIDERS:
        raise ReasonerError(f"--model {spec!r}: unknown provider {provider!r} ({', '.join(PROVIDERS)})")
    return provider, model


def build_chat_model(spec: str) -> Any:
    """``anthropic:MODEL`` or ``openai:MODEL`` (``OPENAI_BASE_URL`` for any compatible server)."""
    provider, model = parse_model_spec(spec)
    try:
        if provider == "anthropic":
            from langchain_anthropic import ChatAnthropic

            return ChatAnthropic(model=model, timeout=120, max_retries=2)
        from langchain_openai import ChatOpenAI

        base_url = os.environ.get("DFTUNE_OPENAI_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        return ChatOpenAI(model=model, base_url=base_url, timeout=120, max_retries=2)
    except ImportError as exc:
        raise ReasonerError(
            f"--model {spec}: {exc.name} is not installed (pip install 'dftune[llm]')"
        ) from None


class LLMReasoner:
    """A chat model answering with typed tool calls; the rules stand behind every answer."""

    def __init__(self, model: Any, *, name: str = "llm", token_budget: int = DEFAULT_TOKEN_BUDGET) -> None:
        self.model = model
        self.name = name
        self.rules = RulesReasoner()
        self.token_budget = token_budget
        self.tokens_used = 0
        self.fallbacks: list[str] = []

    # one typed question, bounded re-asks, then None (the caller falls back to the rules)
    def _ask(self, schema: type[BaseModel], prompt: str, check: Any = None) -> BaseModel | None:
        if self.tokens_used >= self.token_budget:
            self.fallbacks.append(f"token budget {self.token_budget} spent: rules decide")
            return None
        bound = self.model.bind_tools([schema], tool_choice=schema.__name__)
        messages: list[Any] = [("system", load_prompt("optimizer", "system")), ("human", prompt)]
        for _ in range(1 + MAX_REASKS):
            reply = bound.invoke(messages)
            usage = getattr(reply, "usage_metadata", None) or {}
            self.tokens_used += int(usage.get("total_tokens", 0))
            calls = getattr(reply, "tool_calls", None) or []
            try:
                if not calls:
                    raise ValueError(f"answer with one {schema.__name__} tool call, not free text")
                answer = schema.model_validate(calls[0]["args"])
                if check is not None:
                    check(answer)
                return answer
            except (ValidationError, ValueError) as exc:
                messages += [reply, ("human", f"That answer is invalid: {str(exc)[:500]}. Answer again.")]
            if self.tokens_used >= self.token_budget:
                break
        self.fallbacks.append(
            f"{schema.__name__}: no valid answer after {1 + MAX_REASKS} tries: rules decide"
        )
        return None

    def estimate_impacts(self, proposals: Sequence[Proposal], facts: Facts) -> list[ImpactEstimate]:
        ruled = self.rules.estimate_impacts(proposals, facts)
        bound, why = impact_bound(facts)
        ids = {p.id for p in proposals}

        def check(ans: Any) -> None:
            got = {e.proposal_id for e in ans.estimates}
            if got != ids:
                raise ValueError(f"give exactly one estimate for each of {sorted(ids)}")

        prompt = load_prompt("optimizer", "estimate_impacts").format(
            facts=_facts_json(facts), bound=f"{bound:.2f}", bound_reason=why,
            proposals=json.dumps([_option(p) for p in proposals], indent=1),
            rules=json.dumps([e.model_dump() for e in ruled], indent=1),
        )  # fmt: skip
        answer = self._ask(ImpactEstimates, prompt, check)
        if answer is None:
            return ruled
        assert isinstance(answer, ImpactEstimates)
        return [e.model_copy(update={"app_impact_pct": min(e.app_impact_pct, bound),
                                     "reason": f"{e.reason} (model estimate, capped at {why})"})
                for e in answer.estimates]  # fmt: skip

    def choose_next(self, options: Sequence[Proposal], facts: Facts) -> Choice:
        ids = {p.id for p in options}

        def check(ans: Any) -> None:
            if ans.proposal_id not in ids:
                raise ValueError(f"{ans.proposal_id!r} is not one of the offered ids {sorted(ids)}")

        prompt = load_prompt("optimizer", "choose_next").format(
            facts=_facts_json(facts), options=json.dumps([_option(p) for p in options], indent=1)
        )
        answer = self._ask(Choice, prompt, check)
        if answer is None:
            return self.rules.choose_next(options, facts)
        assert isinstance(answer, Choice)
        return answer

    def summarize(self, facts: Facts, outcome: dict[str, Any]) -> str:
        prompt = load_prompt("optimizer", "summarize").format(
            facts=_facts_json(facts), outcome=json.dumps(outcome, indent=1, default=str)
        )
        answer = self._ask(Summary, prompt)
        if answer is None:
            return self.rules.summarize(facts, outcome)
        assert isinstance(answer, Summary)
        return answer.text


def _option(p: Proposal) -> dict[str, Any]:
    return {"id": p.id, "strategy": p.strategy, "layer": p.layer, "description": p.description,
            "app_impact_pct": p.app_impact_pct, "system_impact_pct": p.system_impact_pct,
            "weighted_score": p.weighted_score, "privilege": p.privilege}  # fmt: skip


def _facts_json(facts: Facts) -> str:
    diag = facts.diagnosis
    brief = {
        "workload": facts.workload, "io_fraction": facts.io_fraction,
        "unoverlapped_fraction": facts.unoverlapped_fraction,
        "bottlenecks": [{"category": b.category, "score": b.score, "evidence": b.evidence}
                        for b in (diag.bottlenecks if diag else [])][:8],
        "shape": diag.shape if diag else None, "kb_prior_pct": facts.kb_prior, "history": facts.history,
    }  # fmt: skip
    return json.dumps(brief, indent=1, default=str)


def make_reasoner(spec: str = "rules", *, token_budget: int = DEFAULT_TOKEN_BUDGET) -> Reasoner:
    """``rules`` (offline, deterministic) or ``PROVIDER:MODEL`` for a chat model."""
    if spec == "rules":
        return RulesReasoner()
    parse_model_spec(spec)
    return LLMReasoner(build_chat_model(spec), name=spec, token_budget=token_budget)
