"""A scripted chat model: ``bind_tools`` returns itself, ``invoke`` replays the script."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


def tool_reply(name: str, args: dict[str, Any], tokens: int = 100) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{name}"}],
                     usage_metadata={"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens})  # fmt: skip


class ScriptedChatModel(BaseChatModel):
    script: list[AIMessage]
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        self.bound.append(",".join(getattr(t, "__name__", str(t)) for t in tools))
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:  # fmt: skip
        self.seen.append(list(messages))
        if not self.script:
            raise AssertionError("the scripted model ran out of replies")
        return ChatResult(generations=[ChatGeneration(message=self.script.pop(0))])
