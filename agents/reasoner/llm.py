"""A chat model answering typed questions, with the rules behind every answer.

One judgment is one :class:`~.questions.Question`. The model must call the question's one
tool; an invalid answer is answered with a tool result carrying the error (both APIs require
every tool call to be followed by its result) and asked again, at most ``MAX_REASKS`` times. A
failed request is retried within the judgment's deadline (see :mod:`.transport`). The budget is
checked before every request, with the request's size estimated from its text and the answer's
cap reserved, so a call that could overrun it is never made. Whatever goes wrong, the rules
answer and the :class:`~dftune.core.domain.run.Decision` says why: the graph never crashes on a model.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from dftune.agents.reasoner import transport
from dftune.agents.reasoner.protocol import Choice, Facts, ImpactEstimate, Judgment
from dftune.agents.reasoner.questions import (
    Question,
    choose_question,
    estimate_question,
    load_prompt,
    summary_question,
)
from dftune.agents.reasoner.rules import RulesReasoner
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import Decision, LLMSettings, Outcome
from dftune.core.secrets import redact

#: Re-asks after an invalid answer before the rules decide instead.
MAX_REASKS = 2
#: After this many judgments in a row could not reach the model, stop asking it (this process).
MAX_FAILED_DECISIONS = 2
#: Characters per token when the server reports no usage (conservative for JSON-heavy prompts).
CHARS_PER_TOKEN = 3.0
#: Per-message overhead in tokens (role markers, tool framing).
MESSAGE_OVERHEAD = 8

A = TypeVar("A")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` is likely to cost, from its length (used when the server sends no usage)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _text_of(message: Any) -> str:
    content = getattr(message, "content", message)
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    calls = getattr(message, "tool_calls", None) or []
    return text + "".join(json.dumps(c.get("args"), default=str) for c in calls)


def _request_tokens(messages: Sequence[Any], tool_schema: dict[str, Any]) -> int:
    body = sum(estimate_tokens(_text_of(m)) + MESSAGE_OVERHEAD for m in messages)
    return body + estimate_tokens(json.dumps(tool_schema))


@dataclass
class _Spend:
    tokens: int = 0
    estimated: bool = False
    calls: int = 0
    notes: list[str] = field(default_factory=list)


class RulesOnly:
    """The offline reasoner: the rules answer every question (``--model rules``, the default)."""

    name = "rules"

    def __init__(self, policy: RulesReasoner | None = None) -> None:
        self.policy = policy or RulesReasoner()

    def decide(self, q: Question[A], facts: Facts) -> Judgment[A]:
        start = time.monotonic()
        answer = q.rules()
        return Judgment(
            answer,
            Decision(
                question=q.name,
                reasoner="rules",
                decided_by="rules",
                latency_s=round(time.monotonic() - start, 4),
                answer=q.brief(answer),
                time=_now(),
            ),
        )

    def estimate_impacts(self, proposals: Sequence[Proposal], facts: Facts) -> Judgment[list[ImpactEstimate]]:
        return self.decide(estimate_question(self.policy, proposals, facts), facts)

    def choose_next(self, options: Sequence[Proposal], facts: Facts) -> Judgment[Choice]:
        return self.decide(choose_question(self.policy, options, facts), facts)

    def summarize(self, facts: Facts, outcome: Outcome) -> Judgment[str]:
        return self.decide(summary_question(self.policy, facts, outcome), facts)


class LLMReasoner(RulesOnly):
    """A langchain chat model answering with typed tool calls; the rules stand behind every answer."""

    def __init__(
        self,
        model: Any,
        *,
        name: str = "llm",
        settings: LLMSettings | None = None,
        policy: RulesReasoner | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(policy)
        self.model = model
        self.name = name
        self.settings = settings or LLMSettings()
        self.sleep = sleep
        #: why the model is no longer asked in this process (a bad key, a dead server), or None
        self.disabled: str | None = None
        self._failed_in_row = 0
        #: this process's fallbacks, one line each (the state's decisions hold every run's)
        self.fallbacks: list[str] = []

    def decide(self, q: Question[A], facts: Facts) -> Judgment[A]:
        start = time.monotonic()
        spend = _Spend()
        answers: list[A] = []  # the model's answer, when it gave a valid one
        try:
            fallback = self._ask(q, facts, spend, start, answers)
        except Exception as exc:  # a model must never end an overnight run
            answers, fallback = [], f"unexpected {type(exc).__name__}: {redact(str(exc))[:200]}"
        facts.budget.spent += spend.tokens
        if not answers:
            self.fallbacks.append(f"{q.name}: {fallback}")
        final: A = answers[0] if answers else q.rules()
        decision = Decision(
            question=q.name,
            reasoner=self.name,
            decided_by="rules" if fallback else "model",
            tokens=spend.tokens,
            tokens_estimated=spend.estimated,
            calls=spend.calls,
            latency_s=round(time.monotonic() - start, 3),
            fallback=fallback,
            notes=spend.notes,
            answer=q.brief(final),
            time=_now(),
        )
        return Judgment(final, decision)

    # ------------------------------------------------------------------ one question
    def _ask(self, q: Question[A], facts: Facts, spend: _Spend, start: float, answers: list[A]) -> str:
        """Ask until a valid answer (appended to ``answers``,
        returns "") or a reason for the rules to decide."""
        if self.disabled:
            return self.disabled
        from langchain_core.messages import HumanMessage, SystemMessage
        from langchain_core.utils.function_calling import convert_to_openai_tool

        tool = q.schema.__name__
        bound = self.model.bind_tools([q.schema], tool_choice=tool)
        schema = convert_to_openai_tool(q.schema)
        messages: list[Any] = [SystemMessage(load_prompt("optimizer", "system")), HumanMessage(q.prompt)]
        why = ""
        for attempt in range(1 + MAX_REASKS):
            need = _request_tokens(messages, schema) + self.settings.max_output_tokens
            if not facts.budget.allows(spend.tokens + need):
                spent = facts.budget.spent + spend.tokens
                return (
                    f"token budget: {spent:,} of {facts.budget.limit:,} spent and the next request "
                    f"may take up to {need:,}"
                )
            reply, failure = self._request(bound, messages, spend, start)
            if reply is None:
                return failure
            self._count(reply, messages, schema, spend)
            calls = list(getattr(reply, "tool_calls", None) or [])
            try:
                if not calls:
                    bad = getattr(reply, "invalid_tool_calls", None) or []
                    detail = f"malformed arguments ({bad[0].get('error')})" if bad else "free text"
                    raise ValueError(f"answer with one {tool} tool call, not {detail}")
                accepted = q.accept(q.schema.model_validate(calls[0]["args"]))
                spend.notes += accepted.notes
                answers.append(accepted.answer)
                return ""
            except (ValidationError, ValueError) as exc:
                why = redact(" ".join(str(exc).split()))[:500]
                spend.notes.append(f"answer {attempt + 1} invalid: {why[:200]}")
                messages += reask(reply, why, tool)
        return f"no valid answer after {1 + MAX_REASKS} tries (last: {why[:160]})"

    def _count(self, reply: Any, messages: list[Any], schema: dict[str, Any], spend: _Spend) -> None:
        usage = getattr(reply, "usage_metadata", None) or {}
        total = int(usage.get("total_tokens") or 0) or int(usage.get("input_tokens") or 0) + int(
            usage.get("output_tokens") or 0
        )
        if total <= 0:  # the server sent no usage: count what went there and back
            total = _request_tokens(messages, schema) + estimate_tokens(_text_of(reply))
            spend.estimated = True
        spend.tokens += total

    # ------------------------------------------------------------------ one request, retried
    def _request(self, bound: Any, messages: list[Any], spend: _Spend, start: float) -> tuple[Any, str]:
        s = self.settings
        last = ""
        for attempt in range(1 + s.retries):
            left = s.deadline_s - (time.monotonic() - start)
            if left <= 0.05:
                last = f"deadline of {s.deadline_s:g} s per decision reached" + (
                    f" (last: {last})" if last else ""
                )
                break
            spend.calls += 1
            try:
                reply = bound.invoke(messages, timeout=min(s.timeout_s, left))
            except Exception as exc:
                failure = transport.classify(exc)
                last = failure.text
                if failure.permanent:
                    self.disabled = (
                        f"{self.name} refused ({failure.text}): the rules decide for the rest of the run"
                    )
                    return None, self.disabled
                if not failure.retryable:
                    return None, failure.text
                wait = (
                    failure.retry_after_s
                    if failure.retry_after_s is not None
                    else transport.backoff(attempt, s.backoff_s)
                )
                if attempt == s.retries:
                    break
                if wait > transport.MAX_RETRY_AFTER_S or time.monotonic() - start + wait >= s.deadline_s:
                    last += f"; waiting {wait:.1f} s more would pass the {s.deadline_s:g} s deadline"
                    break
                spend.notes.append(
                    f"request {spend.calls} failed ({failure.text[:120]}); retry in {wait:.1f} s"
                )
                self.sleep(wait)
                continue
            self._failed_in_row = 0
            return reply, ""
        self._failed_in_row += 1
        reason = f"{last} after {spend.calls} request(s)"
        if self._failed_in_row >= MAX_FAILED_DECISIONS:
            self.disabled = (
                f"{self._failed_in_row} decisions in a row could not reach {self.name} "
                f"(last: {last[:120]}): the rules decide for the rest of this process"
            )
        return None, reason


def reask(reply: Any, why: str, tool: str) -> list[Any]:
    """The messages that send an invalid answer back: every tool call gets its (error) tool result.

    Both APIs reject a tool call that is not followed by its result (Anthropic: ``tool_use`` ids
    without ``tool_result``; OpenAI: tool calls not followed by tool messages), so a human turn
    alone is never enough. A reply without tool calls is answered by a human turn."""
    from langchain_core.messages import HumanMessage, ToolMessage

    ids = [
        c.get("id") for c in [*(reply.tool_calls or []), *(getattr(reply, "invalid_tool_calls", None) or [])]
    ]
    ids = [i for i in ids if i]
    text = f"Error: {why}. Call {tool} again with a corrected answer."
    if ids:
        return [reply, *(ToolMessage(content=text, tool_call_id=i, status="error") for i in ids)]
    has_text = bool(str(reply.content).strip()) if isinstance(reply.content, str) else bool(reply.content)
    return [*([reply] if has_text else []), HumanMessage(text)]
