"""What the bot says when a cap pauses a task, and when a writer's resume renews it.

The cap comment says what was spent, what is done (the plan's items done, the files changed
so far), what remains (the plan's open items) and how to go on. Plan items and paths are the
model's words, as the progress comment shows them; the post goes through the same filters as
every post (bot/task/posting.py).
"""

from __future__ import annotations

import re

from bot.core.config import LLMSettings
from bot.core.pricing import shown
from bot.model.grant import MAX_TIMES
from bot.model.state import Cap, TaskState
from bot.task.allowance import KEYS, Counters, Renewal, limits, spent

CAP_HEADER = "Paused: this run reached its "
REFUSED_HEADER = "I cannot grant "
MAX_FILES = 20  # files named in the comment; more are counted
MAX_WORD = 40  # characters of a refused grant quoted back
_NOUN = {Cap.STEPS: "step cap", Cap.TOKENS: "token cap", Cap.COST: "cost cap"}


def cap_note(state: TaskState, llm: LLMSettings, cap: Cap) -> str:
    used, limit = spent(state, llm), limits(state, llm)
    lines = [
        f"{CAP_HEADER}{_NOUN[cap]} (`{KEYS[cap]}`). Nothing is thrown away: the changes, "
        "the conversation and the plan stay as they are.",
        "",
        "**Spent** in this run:",
        *_spending(used, limit, llm),
        "",
        *_done(state),
        "",
        *_remaining(state),
        "",
        f"A writer's `/bot resume` continues with the same allowance again "
        f"({_amounts(_again(llm), llm)} more). {_more(llm)} "
        "Removing the paused label resumes with the same allowance again.",
    ]
    return "\n".join(lines)


def refused_note(words: list[str]) -> str:
    """The answer to `/bot resume <word>` on a task paused at a cap when no word grants."""
    named = ", ".join(_code(word[:MAX_WORD]) for word in words)
    return (
        f"{REFUSED_HEADER}{named}, so that comment resumes nothing. `/bot resume` continues with "
        f"the same allowance again; `/bot resume 2x` (up to {MAX_TIMES:f}x) grants more, "
        "as does an amount: `/bot resume +200k tokens`, `/bot resume +10 steps`, "
        "`/bot resume +$5` (or `+5 EUR`, in the price's currency)."
    )


def _more(llm: LLMSettings) -> str:
    """How to ask for more: the amounts that count here (a cost only with a cost cap)."""
    amounts = ["`/bot resume +200k tokens`", "`/bot resume +10 steps`"]
    if llm.max_cost_per_task is not None and llm.price is not None:
        currency = llm.price.currency.upper()
        amounts.append("`/bot resume +$5`" if currency == "USD" else f"`/bot resume +5 {currency}`")
    return (
        f"`/bot resume 2x` grants twice that (up to {MAX_TIMES:f}x); "
        f"{' or '.join([', '.join(amounts[:-1]), amounts[-1]])} adds to it."
    )


def resumed_note(renewal: Renewal, llm: LLMSettings) -> str:
    """The resume after a cap: what the new allowance adds to what was used."""
    text = f"Resumed where I left off, with {_amounts(renewal.granted, llm)} more."
    return text if renewal.refused is None else f"{text} ({renewal.refused}.)"


def _spending(used: Counters, limit: Counters, llm: LLMSettings) -> list[str]:
    lines = [
        f"- model calls: {used.steps} (allowed: {limit.steps})",
        f"- tokens: {used.tokens:,} (allowed: {limit.tokens:,})",
    ]
    if used.cost is not None and llm.price is not None:
        currency = llm.price.currency
        allowed = "" if limit.cost is None else f" (allowed: {shown(limit.cost, currency)})"
        lines.append(f"- cost: {shown(used.cost, currency)}{allowed}")
    return lines


def _done(state: TaskState) -> list[str]:
    done = [item for item in state.plan if item.done]
    lines = [f"**Done**: {len(done)} of {len(state.plan)} plan items"] if state.plan else []
    lines += [f"- [x] {item.text}" for item in done]
    paths = sorted(state.changes)
    if not paths:
        return [*lines, "No file changed yet."]
    named = [f"{_code(p)}{' (deleted)' if state.changes[p] is None else ''}" for p in paths]
    more = len(named) - MAX_FILES
    listed = ", ".join(named[:MAX_FILES]) + (f" and {more} more" if more > 0 else "")
    return [*lines, f"Files changed so far ({len(paths)}): {listed}"]


def _remaining(state: TaskState) -> list[str]:
    if not state.plan:
        return ["**Remaining**: no plan was given (`update_plan`)."]
    open_items = [item for item in state.plan if not item.done]
    if not open_items:
        return ["**Remaining**: every plan item is done."]
    return ["**Remaining**:", *[f"- [ ] {item.text}" for item in open_items]]


def _again(llm: LLMSettings) -> Counters:
    cost = llm.max_cost_per_task if llm.price is not None else None
    return Counters(llm.max_steps, llm.max_tokens_per_task, cost)


def _amounts(granted: Counters, llm: LLMSettings) -> str:
    parts = [f"{granted.steps} model calls", f"{granted.tokens:,} tokens"]
    if granted.cost is not None and llm.price is not None:
        parts.append(shown(granted.cost, llm.price.currency))
    return ", ".join(parts)


def _code(text: str) -> str:
    """`text` as inline code that no backtick inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
