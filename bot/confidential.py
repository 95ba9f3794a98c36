"""Internal notes stay internal: what the bot posts in public never quotes them.

GitLab internal notes (formerly "confidential") are readable by project members only; the bot,
a member, reads them and the model is told not to reveal them. That is a request to a model,
so every public post is also checked here: any run of characters copied from an internal note
(at least `MIN_RUN` long, compared without case, quote marks or whitespace differences) is
replaced by `WITHHELD` before it leaves.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from bot.forge.base import Forge
from bot.forge.types import Platform, TaskKey
from bot.log import get_logger

log = get_logger(__name__)

WITHHELD = "[internal note withheld]"
MIN_RUN = 24  # a copied run this long is a quote, not a coincidence
SHORTEST = 12  # notes shorter than this cannot be told from ordinary words


def _normalise(text: str) -> tuple[str, list[int]]:
    """`text` lower-cased, Markdown quote marks dropped and whitespace runs made one space; with
    the index in `text` of every character kept."""
    chars: list[str] = []
    where: list[int] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip(" \t>")
        start = offset + len(line) - len(stripped)
        for index, char in enumerate(stripped, start=start):
            if char.isspace():
                if chars and chars[-1] != " ":
                    chars.append(" ")
                    where.append(index)
                continue
            chars.append(char.lower())
            where.append(index)
        offset += len(line)
    return "".join(chars), where


def withhold(text: str, secrets: Iterable[str]) -> str:
    """`text` with every run copied from one of `secrets` replaced by `WITHHELD`."""
    windows: dict[int, set[str]] = {}
    for secret in secrets:
        norm, _ = _normalise(secret)
        norm = norm.strip()
        if len(norm) < SHORTEST:
            continue
        size = min(MIN_RUN, len(norm))
        windows.setdefault(size, set()).update(
            norm[i : i + size] for i in range(len(norm) - size + 1)
        )
    if not windows:
        return text
    norm, where = _normalise(text)
    covered = [False] * len(norm)
    for size, known in windows.items():
        for i in range(len(norm) - size + 1):
            if norm[i : i + size] in known:
                covered[i : i + size] = [True] * size
    spans = _spans(covered, where)
    if not spans:
        return text
    out, last = [], 0
    for start, end in spans:
        out += [text[last:start], WITHHELD]
        last = end
    out.append(text[last:])
    log.warning("internal_text_withheld", runs=len(spans))
    return "".join(out)


def _spans(covered: list[bool], where: list[int]) -> list[tuple[int, int]]:
    """Covered runs of the normalised text as (start, end) ranges of the original."""
    spans: list[tuple[int, int]] = []
    run_start: int | None = None
    for i, flag in enumerate([*covered, False]):
        if flag and run_start is None:
            run_start = i
        elif not flag and run_start is not None:
            start, end = where[run_start], where[i - 1] + 1
            if spans and start <= spans[-1][1]:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
            run_start = None
    return spans


class InternalNotes:
    """A thread's internal notes, kept current with a cursor of their own: the first check after
    a start reads the whole thread, later ones only what changed. Memory only: a restart
    reads again, so nothing depends on a saved state."""

    def __init__(self, forge: Forge, key: TaskKey) -> None:
        self.forge = forge
        self.key = key
        self.texts: dict[str, str] = {}
        self.since: datetime | None = None

    def current(self) -> list[str]:
        if self.key.platform is Platform.GITHUB:
            return []  # GitHub has no internal comments on issues or pull requests
        comments = self.forge.list_comments(self.key, since=self.since)
        for comment in comments:
            if comment.internal:
                self.texts[comment.id] = comment.body
        if comments:
            newest = max(c.updated_at for c in comments)
            self.since = newest if self.since is None else max(self.since, newest)
        return list(self.texts.values())

    def withhold(self, text: str) -> str:
        return withhold(text, self.current())
