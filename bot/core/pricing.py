"""What tokens cost: `llm.price`, exact `Decimal` arithmetic, rounded only when shown.

A cost is always computed from token counts and the configured price (per model call, per
run, per task: `bot/task/timeline.py`), never added up from rounded figures, so the sum of the
calls is the run's cost to the last digit. Without a price there is no cost anywhere: the
timeline, `bot status` and the metrics show tokens only.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from pydantic import BaseModel, ConfigDict, Field

MILLION = Decimal(1_000_000)


class Price(BaseModel):
    """`llm.price`: what a million prompt (input) and completion (output) tokens cost."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_million: Decimal = Field(ge=0)
    output_per_million: Decimal = Field(ge=0)
    # A label, not a conversion: shown beside every amount and on the cost metric.
    currency: str = Field(default="USD", pattern=r"^[A-Za-z][A-Za-z0-9_]{0,15}$")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        """The exact cost of these tokens (not rounded)."""
        spent = prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million
        return spent / MILLION


def shown(amount: Decimal, currency: str) -> str:
    """An amount for people: four decimals (an agent's call costs fractions of a cent), six
    when four would show a cost that is not zero as zero."""
    places = Decimal("0.0001")
    if amount and abs(amount) < Decimal("0.00005"):
        places = Decimal("0.000001")
    return f"{amount.quantize(places, rounding=ROUND_HALF_UP)} {currency}"
