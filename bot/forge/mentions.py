"""Whether a text mentions the bot: `@login` (an app's bot `slug[bot]` is mentioned as `@slug`)."""

from __future__ import annotations

import re


def mention_pattern(login: str) -> re.Pattern[str]:
    name = login.removesuffix("[bot]")
    return re.compile(rf"(?<![\w`/])@{re.escape(name)}(?:\[bot\])?(?![\w-])", re.IGNORECASE)


def mentions(text: str, login: str) -> bool:
    return mention_pattern(login).search(text or "") is not None
