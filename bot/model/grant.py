"""What a writer's `/bot resume` grants a task paused at a cap (README, "Caps").

`/bot resume` grants the allowance again: every cap once more, counted from what was used at
the resume. One word after `resume` asks for more:

    /bot resume 2x             every cap twice over (`1.5x` too; up to 100x)
    /bot resume +200k tokens   the allowance again, and 200,000 tokens more (`k`, `m`)
    /bot resume +10 steps      ... and 10 model calls more
    /bot resume +$5            ... and 5 USD more (`+5 EUR`: in the price's currency)

The grammar is shared by the commands (bot/task/controls.py) and by the calls discovery hears
(bot/forge/mentions.py), so both read a comment the same way. Anything else after `resume`
is not a command at all, as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

_NUMBER = r"\d{1,9}(?:\.\d{1,6})?"
# The word after `resume`: one of four forms, `+` optional before an amount.
_GRANT = re.compile(
    rf"(?P<times>{_NUMBER})\s*[x\u00d7]"
    rf"|\+?\s*(?:(?P<tokens>{_NUMBER})\s*(?P<scale>[km])?\s*tokens?"
    r"|(?P<steps>\d{1,6})\s*(?:steps?|model\s+calls?)"
    rf"|\$\s*(?P<dollars>{_NUMBER})"
    rf"|(?P<cost>{_NUMBER})\s*(?P<currency>[a-z]{{3}}))",
    re.IGNORECASE,
)
MAX_TIMES = Decimal(100)
_SCALE = {"": 1, "k": 1_000, "m": 1_000_000}


@dataclass(frozen=True)
class Grant:
    """The allowance `times` over, plus an amount of one kind."""

    times: Decimal = Decimal(1)
    steps: int = 0
    tokens: int = 0
    cost: Decimal = Decimal(0)
    currency: str | None = None  # of `cost`, as written (`$` is USD), upper case

    def __str__(self) -> str:
        if self.steps:
            return f"+{self.steps} steps"
        if self.tokens:
            return f"+{self.tokens:,} tokens"
        if self.cost:
            return f"+{self.cost} {self.currency}"
        return f"{self.times}x"


PLAIN = Grant()


def parse_grant(word: str) -> Grant | None:
    """The grant `word` asks for, or None when it is not one of the four forms."""
    match = _GRANT.fullmatch(word.strip())
    if match is None:
        return None
    if match["times"] is not None:
        times = Decimal(match["times"])
        return Grant(times=times) if 0 < times <= MAX_TIMES else None
    if match["tokens"] is not None:
        scale = _SCALE[(match["scale"] or "").lower()]
        tokens = int(Decimal(match["tokens"]) * scale)
        return Grant(tokens=tokens) if tokens > 0 else None
    if match["steps"] is not None:
        steps = int(match["steps"])
        return Grant(steps=steps) if steps > 0 else None
    cost = Decimal(match["dollars"] or match["cost"])
    currency = "USD" if match["dollars"] is not None else match["currency"].upper()
    return Grant(cost=cost, currency=currency) if cost > 0 else None
