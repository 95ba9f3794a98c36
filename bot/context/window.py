"""Fit a conversation into the model's window: a hard limit, measured with the real tokenizer.

Kept verbatim: the system message, the opening user message (truncated if it must be), and
the newest turns. Older turns are dropped whole (an assistant tool call with its results), and a
note says how many were left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.context.budget import keep_ends
from bot.context.tokens import TokenCounter
from bot.llm.base import Message


class WindowTooSmall(Exception):
    """Even the system message and a truncated task do not fit."""


@dataclass(frozen=True)
class Fitted:
    messages: list[Message]
    tokens: int
    omitted_turns: int


def turns(messages: list[Message]) -> list[list[Message]]:
    """Group messages so that an assistant tool call stays with its tool results."""
    groups: list[list[Message]] = []
    for message in messages:
        if message["role"] == "tool" and groups:
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


def truncate_text(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The opening message cut to fit: its beginning (the thread's title and first lines) and
    its end (the newest comments, what was left out) are kept; the middle goes."""
    return keep_ends(text, max_tokens, counter)


def fit(
    messages: list[Message],
    limit: int,
    counter: TokenCounter,
    tools_tokens: int = 0,
    pinned: int = 2,
) -> Fitted:
    """`pinned` leading messages are never dropped: system, task, and a history summary."""
    budget = limit - tools_tokens
    head = messages[:pinned]
    body = turns(messages[pinned:])
    total = counter.messages(head) + sum(counter.message(m) for g in body for m in g)
    omitted = 0
    while body and total > budget:
        dropped = body.pop(0)
        total -= sum(counter.message(m) for m in dropped)
        omitted += 1
    note: list[Message] = []
    if omitted:
        note = [
            {
                "role": "user",
                "content": f"({omitted} earlier turns were left out to fit the context window.)",
            }
        ]
        total += counter.message(note[0])
    if total > budget and len(head) >= 2:
        excess = total - budget
        opening = head[1]
        allowed = counter.count(str(opening.get("content") or "")) - excess
        if allowed < 16:
            raise WindowTooSmall(f"context window {limit} cannot hold the system prompt and task")
        head = [
            head[0],
            {**opening, "content": truncate_text(str(opening["content"]), allowed, counter)},
            *head[2:],
        ]
    out = head + note + [m for g in body for m in g]
    tokens = counter.messages(out) + tools_tokens
    if tokens > limit:
        raise WindowTooSmall(f"context window {limit} is too small ({tokens} tokens needed)")
    return Fitted(out, tokens, omitted)
