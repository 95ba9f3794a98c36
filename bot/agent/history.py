"""From the persisted conversation to the messages of one LLM call, within the window.

When the history outgrows the window, older turns are compressed into a summary made by a
separate, budgeted LLM call (not by re-sending the whole history). The system prompt and the
opening task message are always kept, and the newest turns stay verbatim. The summary is
persisted as a conversation entry, so a restart does not pay for it again.
"""

from __future__ import annotations

from typing import Any

from bot.context.budget import truncate
from bot.context.tokens import TokenCounter
from bot.context.window import turns
from bot.llm.base import LLMClient, Message
from bot.log import get_logger
from bot.prompts import load_prompt

log = get_logger(__name__)
ROLES = ("system", "user", "assistant", "tool")
KEEP_SHARE = 0.5  # the newest turns may use up to this share of the window after compaction
SUMMARY_TOKENS = 600
SUMMARY_HEADER = "Summary of the earlier work (older turns were compressed):"

SUMMARY_PROMPT = load_prompt("summarize.md").format(words=SUMMARY_TOKENS // 2).strip()


def to_message(entry: dict[str, Any]) -> Message:
    message: Message = {"role": entry["role"], "content": entry.get("content")}
    for field in ("tool_calls", "tool_call_id"):
        if field in entry:
            message[field] = entry[field]
    return message


def visible(entries: list[dict[str, Any]]) -> list[tuple[int, Message]]:
    """(entry index, message) for what the model sees: the system prompt and the task, the
    latest summary (if any), then every turn the summary does not cover."""
    eligible = [
        (i, e)
        for i, e in enumerate(entries)
        if e.get("role") in ROLES and (e.get("content") is not None or e.get("tool_calls"))
    ]
    head, body = eligible[:2], eligible[2:]
    summaries = [(i, e) for i, e in body if e.get("kind") == "summary"]
    covered = int(summaries[-1][1]["covers_until"]) if summaries else -1
    rest = [(i, e) for i, e in body if i > covered and e.get("kind") != "summary"]
    chosen = head + summaries[-1:] + rest
    return [(i, to_message(e)) for i, e in chosen]


def needs_compaction(messages: list[Message], limit: int, counter: TokenCounter) -> bool:
    return counter.messages(messages) > limit


def compact(
    entries: list[dict[str, Any]], limit: int, counter: TokenCounter, llm: LLMClient
) -> dict[str, Any] | None:
    """A summary entry covering the older turns, or None if there is nothing to compress."""
    items = visible(entries)
    rest = [(i, m) for i, m in items[2:] if entries[i].get("kind") != "summary"]
    groups = turns([m for _, m in rest])
    indices = [i for i, _ in rest]
    keep_budget = int(limit * KEEP_SHARE)
    kept_tokens = 0
    keep_from = len(groups)
    while keep_from > 0:
        cost = sum(counter.message(m) for m in groups[keep_from - 1])
        if kept_tokens + cost > keep_budget and keep_from < len(groups):
            break  # the newest turn always stays verbatim
        kept_tokens += cost
        keep_from -= 1
    if keep_from == 0:
        return None
    old = [m for group in groups[:keep_from] for m in group]
    covers_until = indices[len(old) - 1]
    earlier = [m for i, m in items[2:] if entries[i].get("kind") == "summary"]
    log_text = "\n\n".join(_render(m) for m in earlier + old)
    prompt_budget = limit - counter.count(SUMMARY_PROMPT) - SUMMARY_TOKENS - 64
    request = [
        {"role": "system", "content": SUMMARY_PROMPT},
        {"role": "user", "content": truncate(log_text, max(prompt_budget, 256), counter)},
    ]
    reply = llm.complete(request, [])
    summary = (reply.content or "").strip() or "(the earlier work could not be summarized)"
    log.info(
        "history_compacted",
        turns=keep_from,
        covers_until=covers_until,
        summary_tokens=counter.count(summary),
    )
    return {
        "role": "user",
        "kind": "summary",
        "content": f"{SUMMARY_HEADER}\n{summary}",
        "covers_until": covers_until,
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
        },
    }


def _render(message: Message) -> str:
    role = message["role"]
    text = str(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        text += f"\n[calls {function.get('name')}({function.get('arguments')})]"
    return f"[{role}] {text}"
