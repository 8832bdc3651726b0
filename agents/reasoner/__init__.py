"""Every judgment of the tuning graph goes through one :class:`Reasoner`.

Three judgments today: which proposal to try next, how much each proposal may gain (impact
estimates), and the wording of the run's summary. Each is a typed question (``questions``);
``RulesOnly`` answers with the deterministic, offline policy (``rules``); ``LLMReasoner`` asks a
langchain chat model for a typed tool call, sends invalid answers back as tool errors, retries
failed requests within a per-decision deadline and the run's token budget (``transport``), and
otherwise falls back to the rules. The model only chooses among the typed options it is given
(proposal ids, bounded numbers); it never writes a command. Every answer comes with a
``Decision`` record (who decided, tokens, latency, fallback) that the nodes keep in the state.
"""

from __future__ import annotations

from dftune.agents.reasoner import transport
from dftune.agents.reasoner.llm import MAX_REASKS, LLMReasoner, RulesOnly
from dftune.agents.reasoner.protocol import (
    DEFAULT_TOKEN_BUDGET,
    Budget,
    Choice,
    Facts,
    ImpactEstimate,
    ImpactEstimates,
    Judgment,
    Question,
    Reasoner,
    ReasonerError,
    Summary,
)
from dftune.agents.reasoner.questions import load_prompt
from dftune.agents.reasoner.rules import RulesReasoner, impact_bound, rank_key
from dftune.agents.reasoner.transport import PROVIDERS, check_model, llm_settings, parse_model_spec
from dftune.core.domain.run import LLMSettings


def build_chat_model(spec: str, settings: LLMSettings | None = None) -> object:
    """The chat client for ``PROVIDER:MODEL`` (looked up on :mod:`.transport` so tests can guard it)."""
    return transport.build_chat_model(spec, settings)


def make_reasoner(spec: str = "rules", *, settings: LLMSettings | None = None) -> Reasoner:
    """``rules`` (offline, deterministic) or ``PROVIDER:MODEL`` for a chat model."""
    if spec == "rules":
        return RulesOnly()
    parse_model_spec(spec)
    return LLMReasoner(transport.build_chat_model(spec, settings), name=spec, settings=settings)
