"""Markdown that text cannot break out of: a code fence longer than any backtick run inside."""

from __future__ import annotations

import re


def fence_for(text: str) -> str:
    """A backtick fence longer than any backtick run inside `text`, so it cannot be closed early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)
