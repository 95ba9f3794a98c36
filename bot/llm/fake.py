"""A scripted in-memory `LLMClient` for unit tests: replies in order, requests recorded."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

from bot.llm.base import LLMError, LLMReply, Message, ToolSpec

Script = LLMReply | Exception | Callable[[Sequence[Message]], LLMReply]


class ScriptedLLM:
    def __init__(self, replies: Sequence[Script], default: Script | None = None) -> None:
        self._replies = list(replies)
        self._default = default
        self.requests: list[list[Message]] = []

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> LLMReply:
        self.requests.append(copy.deepcopy(list(messages)))
        if self._replies:
            script = self._replies.pop(0)
        elif self._default is not None:
            script = self._default
        else:
            raise LLMError("script exhausted")
        if isinstance(script, Exception):
            raise script
        if callable(script):
            return script(messages)
        return script
