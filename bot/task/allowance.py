"""What a run may spend, what it spent, and whether a cap is reached (docs/architecture.md,
invariant 16: a cap asks, it does not destroy).

The caps (`llm.max_steps`, `llm.max_tokens_per_task`, `llm.max_cost_per_task` at
`llm.price`) are limits on the run's own counters: `step` (model calls), the usage's tokens,
and what those tokens cost. Until a writer resumes a capped task they are the configured
caps; a resume sets the task's `Allowance` to what was used at the resume plus the caps again
(times the grant, plus its amount), so the comparison always reads the state and a restart
keeps what was granted.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from bot.core.config import LLMSettings
from bot.core.pricing import Price
from bot.model.grant import Grant
from bot.model.state import Allowance, Cap, TaskState, Usage

KEYS = {
    Cap.STEPS: "llm.max_steps",
    Cap.TOKENS: "llm.max_tokens_per_task",
    Cap.COST: "llm.max_cost_per_task",
}


def cost_of(usage: Usage, price: Price) -> Decimal:
    """What the run's tokens cost at `price` (prompt as input, completion as output)."""
    return price.cost(usage.prompt_tokens, usage.completion_tokens)


@dataclass(frozen=True)
class Counters:
    """Model calls, tokens and cost: what a run spent, or what it may spend."""

    steps: int
    tokens: int
    cost: Decimal | None  # spent: None when unpriced; limit: None without a cost cap


def spent(state: TaskState, llm: LLMSettings) -> Counters:
    cost = None if llm.price is None else cost_of(state.usage, llm.price)
    return Counters(state.step, state.usage.total, cost)


def limits(state: TaskState, llm: LLMSettings) -> Counters:
    """The allowance in force: what a resume granted, else the configured caps. The cost cap
    holds only while it is configured (with its price)."""
    granted = state.allowance
    cost = None
    if llm.max_cost_per_task is not None and llm.price is not None:
        cost = granted.cost if granted.cost is not None else llm.max_cost_per_task
    steps = granted.steps if granted.steps is not None else llm.max_steps
    tokens = granted.tokens if granted.tokens is not None else llm.max_tokens_per_task
    return Counters(steps, tokens, cost)


def reached(state: TaskState, llm: LLMSettings) -> Cap | None:
    """The first cap the run has reached, or None while it is within its allowance."""
    used, limit = spent(state, llm), limits(state, llm)
    if used.steps >= limit.steps:
        return Cap.STEPS
    if used.tokens >= limit.tokens:
        return Cap.TOKENS
    if limit.cost is not None and used.cost is not None and used.cost >= limit.cost:
        return Cap.COST
    return None


@dataclass(frozen=True)
class Renewal:
    allowance: Allowance  # the limits from now on
    granted: Counters  # what it adds to what was used
    refused: str | None = None  # the part of the grant not added, and why


def renew(state: TaskState, llm: LLMSettings, grant: Grant) -> Renewal:
    """The allowance a resume gives: every cap again (`grant.times` over) counted from what
    was used now, plus the grant's amount. A cost amount counts only in the price's currency
    and where a cost cap is configured."""
    used = spent(state, llm)
    steps = _times(llm.max_steps, grant.times) + grant.steps
    tokens = _times(llm.max_tokens_per_task, grant.times) + grant.tokens
    cost: Decimal | None = None
    refused = None
    if llm.max_cost_per_task is not None and llm.price is not None:
        extra = grant.cost
        if grant.cost and grant.currency != llm.price.currency.upper():
            refused = f"`{grant}` was not added: the price is in {llm.price.currency}"
            extra = Decimal(0)
        cost = llm.max_cost_per_task * grant.times + extra
    elif grant.cost:
        refused = f"`{grant}` was not added: there is no cost cap (`llm.max_cost_per_task`)"
    allowance = Allowance(
        steps=used.steps + steps,
        tokens=used.tokens + tokens,
        cost=None if cost is None else (used.cost or Decimal(0)) + cost,
    )
    return Renewal(allowance, Counters(steps, tokens, cost), refused)


def _times(cap: int, times: Decimal) -> int:
    return max(1, int((cap * times).to_integral_value(rounding=ROUND_HALF_UP)))
