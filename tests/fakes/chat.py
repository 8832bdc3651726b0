"""A scripted chat model: ``bind_tools`` returns itself, ``invoke`` replays the script.

It is as strict as the real APIs about message order: every request is converted to both wire
formats with the integrations' own converters (langchain-anthropic, langchain-openai) and checked
by the same rules the local API servers enforce (tests/fakes/llm_api.py). A request that either
API would refuse with a 400 raises ``ModelInvalidRequestError`` (what the integrations raise) and
is recorded in ``violations``, which a test must find empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.exceptions import ModelInvalidRequestError
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


def tool_reply(name: str, args: dict[str, Any], tokens: int = 100) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": name, "args": args, "id": f"call-{name}"}],
        usage_metadata={"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens},
    )


def api_violations(messages: Sequence[BaseMessage]) -> list[str]:
    """What the Anthropic and the OpenAI API would each refuse in this list of messages."""
    from langchain_anthropic.chat_models import _format_messages
    from langchain_openai.chat_models.base import _convert_message_to_dict

    from tests.fakes.llm_api import AnthropicAPI, OpenAIAPI, _Invalid

    out = []
    system, formatted = _format_messages(list(messages), model="claude-test")
    try:
        AnthropicAPI()._validate(
            "/v1/messages",
            {"anthropic-version": "2023-06-01"},
            {"model": "claude-test", "max_tokens": 16, "system": system, "messages": formatted},
        )
    except _Invalid as exc:
        out.append(f"anthropic: {exc}")
    try:
        OpenAIAPI()._validate(
            "/v1/chat/completions",
            {},
            {"model": "gpt-test", "messages": [_convert_message_to_dict(m) for m in messages]},
        )
    except _Invalid as exc:
        out.append(f"openai: {exc}")
    return out


class ScriptedChatModel(BaseChatModel):
    script: list[AIMessage]
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[str] = Field(default_factory=list)
    violations: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        self.bound.append(",".join(getattr(t, "__name__", str(t)) for t in tools))
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        broken = api_violations(messages)
        if broken:
            self.violations += broken
            raise ModelInvalidRequestError("; ".join(broken))
        if not self.script:
            raise AssertionError("the scripted model ran out of replies")
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])
