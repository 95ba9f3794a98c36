from __future__ import annotations

from pathlib import Path

import pytest

from bot.context.tokens import Estimator, TokenCounter, encoding_for

CORPORA = Path(__file__).parent / "fixtures" / "corpora"
FILES = ["english.txt", "code_sample.py.txt", "japanese.txt"]


def pieces(name: str) -> list[str]:
    """The whole corpus, and each half of it (cut at a paragraph)."""
    text = (CORPORA / name).read_text(encoding="utf-8")
    paragraphs = text.split("\n\n")
    middle = len(paragraphs) // 2
    return [text, "\n\n".join(paragraphs[:middle]), "\n\n".join(paragraphs[middle:])]


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("name", FILES)
def test_estimator_within_ten_percent(name: str, encoding: str) -> None:
    counter, estimator = TokenCounter(encoding), Estimator(encoding)
    for text in pieces(name):
        exact = counter.count(text)
        assert abs(estimator.estimate(text) - exact) <= 0.10 * exact, (name, exact)


def test_chars_over_four_undercounts_japanese_badly() -> None:
    # Why the estimator exists: the usual shortcut is far off for Japanese.
    text = (CORPORA / "japanese.txt").read_text(encoding="utf-8")
    exact = TokenCounter("cl100k_base").count(text)
    assert len(text) / 4 < 0.5 * exact
    assert abs(Estimator("cl100k_base").estimate(text) - exact) <= 0.1 * exact


def test_encoding_by_model_name() -> None:
    assert encoding_for("gpt-4o-mini") == "o200k_base"
    assert encoding_for("openai/gpt-5") == "o200k_base"
    assert encoding_for("llama3.1") == "cl100k_base"
    assert encoding_for("gpt-4o", "cl100k_base") == "cl100k_base"


def test_counts_are_cached() -> None:
    counter = TokenCounter()
    text = "hello " * 1000
    counter.count(text)
    hits = counter._cached.cache_info().hits
    counter.count(text)
    assert counter._cached.cache_info().hits == hits + 1
    counter.count("x " * 10_000)  # long texts are counted, not kept
    assert counter._cached.cache_info().currsize == 1
