"""One model call that survives a "too long" refusal: shrink the request once and retry.

Our count of a request uses the configured tokenizer; the endpoint counts with the model's own
and may run a smaller window than configured (an Ollama or llama.cpp server started with a
short context). When it refuses, its numbers (when it gives them) say by how much we were off.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.context.window import Fitted, WindowTooSmall
from bot.core.log import get_logger
from bot.llm.base import ContextTooLong, LLMClient, LLMReply, ToolSpec

log = get_logger(__name__)
MARGIN = 0.9  # aim this far under the endpoint's stated room: tokenizers differ per message
ANSWER_SHARE = 0.2  # of the endpoint's window, kept for the answer when it gave no split
BLIND_SHRINK = 0.75  # with no numbers in the refusal


class StillTooLong(Exception):
    """The shrunk request was refused too, or cannot be made small enough: the task fails
    with the endpoint's reason."""

    def __init__(self, reason: str, tokens: int) -> None:
        super().__init__(
            f"the model endpoint refused the request as too long for its context window, "
            f'also after it was shrunk to {tokens} tokens: "{reason}"'
        )


@dataclass
class WindowCap:
    """What a run learned about the endpoint's real window (our tokens), so that one refusal
    is paid once per run, not once per call."""

    tokens: int | None = None

    def limit(self, budget: int) -> int:
        return budget if self.tokens is None else min(budget, self.tokens)


def shrunk_limit(sent: int, refusal: ContextTooLong) -> int:
    """The token limit (our count) for the retry of a request of `sent` tokens."""
    if refusal.window and refusal.prompt:
        room = (
            refusal.window - refusal.completion
            if refusal.completion is not None
            else int(refusal.window * (1 - ANSWER_SHARE))
        )
        target = int(sent * max(room, 0) / refusal.prompt * MARGIN)
    else:
        target = int(sent * BLIND_SHRINK)
    return max(min(target, int(sent * MARGIN)), 0)


def complete_or_shrink(
    llm: LLMClient,
    fitted: Fitted,
    tools: Sequence[ToolSpec],
    refit: Callable[[int], Fitted],
    cap: WindowCap,
) -> tuple[LLMReply, Fitted]:
    """`llm.complete` on `fitted`; after a too-long refusal, once more on `refit(smaller)`,
    and if that is accepted, `cap` keeps the smaller limit for the rest of the run."""
    try:
        return llm.complete(fitted.messages, tools), fitted
    except ContextTooLong as refusal:
        limit = shrunk_limit(fitted.tokens, refusal)
        log.warning(
            "model_context_exceeded",
            reason=refusal.reason,
            sent_tokens=fitted.tokens,
            endpoint_window=refusal.window,
            endpoint_prompt=refusal.prompt,
            retry_limit=limit,
        )
        try:
            smaller = refit(limit)
        except WindowTooSmall:
            raise StillTooLong(refusal.reason, limit) from None
    try:
        reply = llm.complete(smaller.messages, tools)
    except ContextTooLong as again:
        raise StillTooLong(again.reason, smaller.tokens) from None
    cap.tokens = limit
    return reply, smaller
