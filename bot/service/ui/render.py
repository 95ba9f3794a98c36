"""The templates (`templates/*.html`, package data) and the one Jinja2 environment that
renders them, with autoescaping on for everything: `{{ text }}` is always escaped, and
nothing marks a forge's or the model's text safe."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from bot.core.pricing import shown


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("bot.service.ui", "templates"),
        autoescape=True,  # every template, whatever its name: forge text is never markup
        undefined=StrictUndefined,  # a misspelt name fails the test, not silently the page
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(money=money, seconds=seconds, clock=clock, stamp=stamp, count=count)
    return env


def render(env: Environment, template: str, **values: Any) -> bytes:
    return env.get_template(template).render(**values).encode("utf-8")


def money(amount: Decimal | None, currency: str | None) -> str:
    if amount is None or not currency:
        return ""
    return shown(amount, currency)


def seconds(value: float | None) -> str:
    """`0.4 s`, `45 s`, `3 min 5 s`, `2 h 4 min`."""
    if value is None:
        return ""
    if value < 10:
        return f"{value:.1f} s"
    hours, rest = divmod(round(value), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def clock(at: datetime | None) -> str:
    return f"{at:%H:%M:%S}" if at is not None else ""


def stamp(at: datetime | None) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S}Z" if at is not None else "unknown"


def count(value: int | None) -> str:
    return f"{value:,}" if value is not None else ""
