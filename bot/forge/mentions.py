"""Whether a text calls the bot: `@login` anywhere (an app's bot `slug[bot]` is mentioned as
`@slug`), or a `/bot` command (`/bot`, `/bot start`, `/bot resume`, `/bot resume 2x`) on its first
non-empty line, the grammar of `bot.task.controls.parse_command`."""

from __future__ import annotations

import re

from bot.model.grant import parse_grant

_START = re.compile(r"^\s*/bot(?:\s+(?:start|resume(?:\s+(?P<grant>\S.*?))?))?\s*$", re.IGNORECASE)


def mention_pattern(login: str) -> re.Pattern[str]:
    name = login.removesuffix("[bot]")
    return re.compile(rf"(?<![\w`/])@{re.escape(name)}(?:\[bot\])?(?![\w-])", re.IGNORECASE)


def mentions(text: str, login: str) -> bool:
    return mention_pattern(login).search(text or "") is not None


def starts_bot(text: str) -> bool:
    for line in (text or "").splitlines():
        if line.strip():
            match = _START.match(line)
            grant = None if match is None else match["grant"]
            return match is not None and (grant is None or parse_grant(grant) is not None)
    return False


def calls_bot(text: str, login: str) -> bool:
    return mentions(text, login) or starts_bot(text)
