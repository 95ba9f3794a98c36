"""`LLMClient` on the official `openai` SDK, for any OpenAI-compatible endpoint.

Retries are the SDK's: connection errors, 408, 409, 429 and 5xx are retried with exponential
backoff that honours `Retry-After`; other 4xx are not. Servers without tool calling are used in
"prompt" mode: the tools are described in the system message and the model answers with one
fenced JSON block `{"tool": NAME, "arguments": {...}}`, which is parsed back into a tool call.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import uuid
from collections.abc import Sequence
from typing import Any, Literal

from bot.core.prompts import load_prompt
from bot.llm.base import LLMCancelled, LLMError, LLMFatal, LLMReply, Message, ToolCall, ToolSpec
from bot.llm.overflow import context_overflow

_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)

PROMPT_TOOLS_HEADER = load_prompt("tools_fallback.md")
STOP_CHECK_SECONDS = 0.2  # how often a waiting call looks at the stop event


class OpenAIClient:
    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        max_retries: int = 4,
        tool_calling: Literal["native", "prompt"] = "native",
        max_output_tokens: int | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self._options: dict[str, Any] = {
            "base_url": base_url,
            # Local servers need no key, but the SDK insists on a value.
            "api_key": api_key or "not-needed",
            "timeout": timeout,
            "max_retries": max_retries,
        }
        self._client: Any = None
        self._model = model
        self._tool_calling = tool_calling
        self._max_output_tokens = max_output_tokens
        # Set when the daemon stops: an in-flight call is abandoned instead of waited for (a
        # slow model can take `timeout` seconds times the SDK's retries, longer than
        # systemd's TimeoutStopSec).
        self._stop = stop
        self._lock = threading.Lock()

    def _sdk(self) -> Any:
        # Imported and built on first use: the SDK costs ~20 MB an idle daemon does not need.
        with self._lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(**self._options)
            return self._client

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> LLMReply:
        import openai

        client = self._sdk()
        kwargs: dict[str, Any] = {"model": self._model}
        if self._max_output_tokens:
            kwargs["max_tokens"] = self._max_output_tokens
        if self._tool_calling == "native":
            kwargs["messages"] = list(messages)
            if tools:
                kwargs["tools"] = [t.openai() for t in tools]
        else:
            kwargs["messages"] = prompt_mode_messages(messages, tools)
        try:
            response = self._create(client, kwargs)
        except openai.APIStatusError as exc:
            overflow = context_overflow(exc.status_code, exc.body, exc.message)
            if overflow is not None:
                raise overflow from None
            if exc.status_code in (408, 409, 429) or exc.status_code >= 500:
                raise LLMError(f"model endpoint error {exc.status_code} after retries") from None
            raise LLMFatal(f"model endpoint refused the request ({exc.status_code})") from None
        except openai.APIConnectionError as exc:
            raise LLMError(f"model endpoint unreachable: {type(exc).__name__}") from None
        except openai.OpenAIError as exc:
            raise LLMError(f"model call failed: {type(exc).__name__}") from None
        return self._reply(response)

    def _create(self, client: Any, kwargs: dict[str, Any]) -> Any:
        """The SDK call, on its own thread when a stop event is given, so that stopping does
        not wait for the model: the caller returns at once and the call is abandoned (a
        daemon thread; its connection goes away with the process, which is stopping)."""
        if self._stop is None:
            return client.chat.completions.create(**kwargs)
        if self._stop.is_set():
            raise LLMCancelled("model call not started: the daemon is stopping")
        outcome: dict[str, Any] = {}
        finished = threading.Event()

        def call() -> None:
            try:
                outcome["response"] = client.chat.completions.create(**kwargs)
            except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread below
                outcome["error"] = exc
            finally:
                finished.set()

        threading.Thread(target=call, name="llm-call", daemon=True).start()
        while not finished.wait(STOP_CHECK_SECONDS):
            if self._stop.is_set():
                self._abandon(client)
                raise LLMCancelled("model call abandoned: the daemon is stopping")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["response"]

    def _abandon(self, client: Any) -> None:
        # Closing the SDK's client drops its idle connections and keeps later calls off it (a
        # new client is built if work starts again). A read blocked in the abandoned thread
        # is not interrupted by that; it ends with the process or the request's timeout.
        with self._lock:
            if self._client is client:
                self._client = None
        with contextlib.suppress(OSError):  # best effort: the process is on its way out
            client.close()

    def _reply(self, response: Any) -> LLMReply:
        if not getattr(response, "choices", None):
            raise LLMError("model returned no choices")
        message = response.choices[0].message
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        content = message.content
        calls = tuple(
            ToolCall(c.id or _call_id(), c.function.name, c.function.arguments or "")
            for c in (message.tool_calls or [])
            if getattr(c, "function", None) is not None
        )
        if self._tool_calling == "prompt" and content:
            parsed = parse_fenced_call(content)
            if parsed is not None:
                calls = (parsed,)
        return LLMReply(content, calls, prompt, completion, usage_reported=usage is not None)


def prompt_mode_messages(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[Message]:
    """Rewrite a native tool conversation for a server that only knows plain chat."""
    described = "\n".join(
        f"- {t.name}: {t.description}\n  {json.dumps(t.parameters, separators=(',', ':'))}"
        for t in tools
    )
    out: list[Message] = []
    for message in messages:
        role = message["role"]
        if role == "system" and not out:
            out.append(
                {
                    "role": "system",
                    "content": f"{message['content']}\n{PROMPT_TOOLS_HEADER}{described}",
                }
            )
        elif role == "tool":
            out.append({"role": "user", "content": f"[tool result]\n{message['content']}"})
        elif role == "assistant" and message.get("tool_calls"):
            call = message["tool_calls"][0]["function"]
            block = json.dumps({"tool": call["name"], "arguments": _loads(call["arguments"])})
            out.append({"role": "assistant", "content": f"```json\n{block}\n```"})
        else:
            out.append({"role": role, "content": message.get("content") or ""})
    return out


def parse_fenced_call(text: str) -> ToolCall | None:
    for match in _FENCE.finditer(text):
        try:
            data = json.loads(match.group(1))
        except json.JSONDecodeError:
            # Returned as a call with the raw text so the tool layer answers "malformed".
            return ToolCall(_call_id(), "__malformed__", match.group(1))
        if isinstance(data, dict) and isinstance(data.get("tool"), str):
            return ToolCall(_call_id(), data["tool"], json.dumps(data.get("arguments", {})))
    return None


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"
