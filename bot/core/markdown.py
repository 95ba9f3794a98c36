"""Markdown that text cannot break out of: a code fence longer than any backtick run inside."""

from __future__ import annotations

import re
import unicodedata


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run inside `text`, so it cannot be closed early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def code_span(text: str) -> str:
    """`text` as an inline code span nothing in it can end (CommonMark, "Code spans"): one
    printable line (control, format and line-breaking characters become spaces: a blank line
    would end the span's paragraph), fenced with more backticks than any run inside, padded
    when it starts or ends with one. For names from outside: a fork's branch or file path."""
    printable = "".join(" " if unicodedata.category(c)[0] in "CZ" else c for c in text)
    line = " ".join(printable.split()) or "(empty)"
    fence = "`" * (max((len(m) for m in re.findall(r"`+", line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"
