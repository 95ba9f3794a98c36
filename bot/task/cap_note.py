"""What the bot says when a cap pauses a task, and when a writer's resume renews it.

The cap comment says what was spent, what is done (the plan's items done, the files changed
so far), what remains (the plan's open items) and how to go on. Plan items and paths are the
model's words, as the progress comment shows them; the post goes through the same filters as
every post (bot/task/posting.py).
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

from bot.core.config import LLMSettings
from bot.model.state import Cap, TaskState
from bot.task.allowance import KEYS, Counters, Renewal, limits, spent

CAP_HEADER = "Paused: this run reached its "
MAX_FILES = 20  # files named in the comment; more are counted
_NOUN = {Cap.STEPS: "step cap", Cap.TOKENS: "token cap", Cap.COST: "cost cap"}


def money(amount: Decimal, currency: str) -> str:
    """Cents from one unit up; below it up to four places (a model call costs fractions)."""
    if abs(amount) >= 1 or not amount:
        return f"{amount.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):f} {currency}"
    small = amount.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP).normalize()
    return f"{small:f} {currency}"


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
        f"({_amounts(_again(llm), llm)} more). `/bot resume 2x` grants twice that; "
        "`/bot resume +200k tokens`, `/bot resume +10 steps` or `/bot resume +$5` adds to it. "
        "Removing the paused label resumes with the same allowance again.",
    ]
    return "\n".join(lines)


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
        allowed = "" if limit.cost is None else f" (allowed: {money(limit.cost, currency)})"
        lines.append(f"- cost: {money(used.cost, currency)}{allowed}")
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
        parts.append(money(granted.cost, llm.price.currency))
    return ", ".join(parts)


def _code(text: str) -> str:
    """`text` as inline code that no backtick inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
