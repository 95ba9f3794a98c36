"""Recognising an endpoint's "request too long" refusal, in the shapes real servers send.

All three answer HTTP 400; the openai SDK hands us the inner `error` object as `body` when
there is one, else the whole body:

- OpenAI: `{"error": {"message": "This model's maximum context length is 8192 tokens. However,
  your messages resulted in 9310 tokens. ...", "type": "invalid_request_error",
  "param": "messages", "code": "context_length_exceeded"}}`
  (platform.openai.com/docs/guides/error-codes; the message as quoted in many reports, e.g.
  github.com/chathub-dev/chathub/issues/126).
- vLLM: `{"object": "error", "message": "This model's maximum context length is 4096 tokens.
  However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please
  reduce the length of the messages or completion.", "type": "BadRequestError", "code": 400}`
  (vllm/entrypoints/openai/serving_engine.py `_validate_input`; github.com/vllm-project/vllm
  issues 20409, 19464).
- llama.cpp server: `{"error": {"code": 400, "message": "request (5000 tokens) exceeds the
  available context size (4096 tokens), try increasing it", "type":
  "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}`
  (tools/server/server-context.cpp, `ERROR_TYPE_EXCEED_CONTEXT_SIZE`; older builds: "input is
  larger than the max context size").
"""

from __future__ import annotations

import re
from typing import Any

from bot.core.log import redactor
from bot.llm.base import ContextTooLong

MAX_REASON = 300
_OVERFLOW = re.compile(
    r"maximum context length|context length exceeded|context_length_exceeded"
    r"|exceeds? (?:the )?(?:available )?context (?:size|length|window)"
    r"|larger than the max context size|context window (?:is )?(?:full|exceeded)"
    r"|too many tokens|input is too long|prompt is too long",
    re.IGNORECASE,
)
_WINDOW = re.compile(
    r"maximum context length (?:is |of )?(\d+)|available context size \((\d+) tokens\)"
    r"|max context size \((\d+) tokens\)",
    re.IGNORECASE,
)
# Tried in order: the prompt alone ("in the messages") before a total ("requested").
_PROMPT = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"(\d+) in the messages",
        r"messages resulted in (\d+) tokens",
        r"request has (\d+) input tokens",
        r"request \((\d+) tokens\)",
        r"input \((\d+) tokens\)",
        r"requested (\d+) tokens",
    )
)
_COMPLETION = re.compile(r"(\d+) in the completion", re.IGNORECASE)


def context_overflow(status: int, body: object, message: str) -> ContextTooLong | None:
    """The refusal as `ContextTooLong`, or None when it is some other error."""
    if status not in (400, 413):
        return None
    error: dict[str, Any] = body if isinstance(body, dict) else {}
    text = str(error.get("message") or message or "")
    code, kind = str(error.get("code") or ""), str(error.get("type") or "")
    overflow = code == "context_length_exceeded" or kind == "exceed_context_size_error"
    if not overflow and not _OVERFLOW.search(text):
        return None
    window = _int(error.get("n_ctx")) or _first(_WINDOW, text)
    prompt = _int(error.get("n_prompt_tokens")) or next(
        (n for pattern in _PROMPT if (n := _first(pattern, text)) is not None), None
    )
    return ContextTooLong(_clean(text), window, prompt, _first(_COMPLETION, text))


def _first(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    if match is None:
        return None
    return next(int(group) for group in match.groups() if group is not None)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _clean(text: str) -> str:
    """One line, capped, with anything secret-shaped removed: it goes into a public comment."""
    line = " ".join(redactor().scrub(text).split())
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 1] + "…"
