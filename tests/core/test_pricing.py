"""`llm.price`: exact `Decimal` costs, rounded only when shown; a bad price names its key."""

from __future__ import annotations

from decimal import Decimal

import pytest

from bot.core.config import ConfigError, parse_settings
from bot.core.pricing import Price, shown

SOURCE = "github: {token: x, repositories: [acme/app]}\n"


def test_costs_are_exact_and_add_up_to_the_last_digit() -> None:
    price = Price(input_per_million=Decimal("0.15"), output_per_million=Decimal("0.60"))
    calls = [(586, 21), (592, 7), (615, 21), (620, 14)]
    each = [price.cost(p, c) for p, c in calls]
    total = price.cost(sum(p for p, _ in calls), sum(c for _, c in calls))
    assert sum(each) == total == Decimal("0.00039975")  # floats would not add up exactly
    assert price.currency == "USD"


def test_amounts_are_rounded_only_when_shown() -> None:
    assert shown(Decimal("0.00039975"), "USD") == "0.0004 USD"
    assert shown(Decimal("0.00000912"), "EUR") == "0.000009 EUR"  # not shown as zero
    assert shown(Decimal("12.34565"), "USD") == "12.3457 USD"
    assert shown(Decimal(0), "USD") == "0.0000 USD"


def test_a_price_from_yaml_reads_as_written() -> None:
    settings = parse_settings(
        SOURCE
        + "llm: {price: {input_per_million: 2.5, output_per_million: '10.00', currency: EUR}}",
        {},
    )
    assert settings.llm.price == Price(
        input_per_million=Decimal("2.5"), output_per_million=Decimal("10.00"), currency="EUR"
    )
    assert parse_settings(SOURCE + "llm: {}", {}).llm.price is None


@pytest.mark.parametrize(
    ("price", "key"),
    [
        ("{input_per_million: -1, output_per_million: 1}", "llm.price.input_per_million"),
        ("{input_per_million: 1}", "llm.price.output_per_million"),
        ("{input_per_million: 1, output_per_million: .nan}", "llm.price.output_per_million"),
        ("{input_per_million: 1, output_per_million: 1, currency: 'US $'}", "llm.price.currency"),
        ("{input_per_milion: 1, output_per_million: 1}", "llm.price.input_per_milion"),
    ],
)
def test_a_bad_price_names_its_key(price: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(SOURCE + f"llm: {{price: {price}}}", {})
    assert caught.value.path == key
