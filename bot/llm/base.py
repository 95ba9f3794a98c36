"""What the agent needs from a model, independent of any SDK."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

Message = dict[str, Any]  # OpenAI chat message shape: role, content, tool_calls, tool_call_id


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; validated by the tool layer


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]

    def openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True)
class LLMReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # False when the endpoint sent no `usage` (it is optional in the API): the counts above
    # are then 0 for want of numbers, not because the call was free.
    usage_reported: bool = True

    def message(self) -> Message:
        message: Message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        return message


class LLMError(Exception):
    """The model could not answer after the client's retries."""


class LLMCancelled(LLMError):
    """The call was abandoned because the daemon is stopping; nothing is wrong with the model."""


class LLMFatal(LLMError):
    """Retrying will not help (bad request, auth, unknown model)."""


class ContextTooLong(LLMFatal):
    """The endpoint refused the request as longer than its context window.

    `reason` is the endpoint's own message (cleaned, capped, secrets scrubbed) so a failure
    comment can quote it; `window` and `prompt` are the endpoint's numbers when it gave them
    (its window, and its count of the refused prompt), which say how much to shrink.
    """

    def __init__(
        self,
        reason: str,
        window: int | None = None,
        prompt: int | None = None,
        completion: int | None = None,
    ) -> None:
        super().__init__(f"the request is too long for the model's context window: {reason}")
        self.reason = reason
        self.window = window
        self.prompt = prompt
        self.completion = completion


class LLMClient(Protocol):
    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> LLMReply: ...
