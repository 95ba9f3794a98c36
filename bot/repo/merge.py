"""Three-way merge of one file, line by line (pure Python: no git in the daemon).

`base` is the file in the pinned commit, `ours` the bot's version, `theirs` the branch head's.
Changes that touch different lines combine; changes to the same or adjacent lines conflict
unless both sides made the same change (git's merge treats adjacent edits as a conflict too).
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass(frozen=True)
class _Hunk:
    start: int  # base lines [start, end) are replaced by `lines`
    end: int
    lines: tuple[str, ...]
    side: int  # 0 ours, 1 theirs


class Conflict(Exception):
    """Both sides changed the same place differently."""


def merge_file(base: bytes | None, ours: bytes | None, theirs: bytes | None) -> bytes | None:
    """The merged file (None: deleted). Raises `Conflict`."""
    if ours == theirs or theirs == base:
        return ours
    if ours == base:
        return theirs
    if base is None or ours is None or theirs is None:
        raise Conflict  # added on both sides differently, or changed on one and deleted on one
    try:
        texts = [data.decode("utf-8") for data in (base, ours, theirs)]
    except UnicodeDecodeError:
        raise Conflict from None  # binary content changed on both sides
    return merge_text(*texts).encode("utf-8")


def merge_text(base: str, ours: str, theirs: str) -> str:
    lines = base.splitlines(keepends=True)
    hunks = sorted(
        _hunks(lines, ours.splitlines(keepends=True), 0)
        + _hunks(lines, theirs.splitlines(keepends=True), 1),
        key=lambda h: (h.start, h.end, h.side),
    )
    out: list[str] = []
    position = 0
    index = 0
    while index < len(hunks):
        cluster = [hunks[index]]
        start, end = hunks[index].start, hunks[index].end
        index += 1
        while index < len(hunks) and hunks[index].start <= end:  # overlapping or adjacent
            cluster.append(hunks[index])
            end = max(end, hunks[index].end)
            index += 1
        mine = _apply(lines, start, end, [h for h in cluster if h.side == 0])
        other = _apply(lines, start, end, [h for h in cluster if h.side == 1])
        sides = {h.side for h in cluster}
        if len(sides) == 2 and mine != other:
            raise Conflict
        out += lines[position:start]
        out += mine if 0 in sides else other
        position = end
    out += lines[position:]
    return "".join(out)


def _hunks(base: list[str], other: list[str], side: int) -> list[_Hunk]:
    matcher = SequenceMatcher(None, base, other, autojunk=False)
    return [
        _Hunk(i1, i2, tuple(other[j1:j2]), side)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _apply(base: list[str], start: int, end: int, hunks: list[_Hunk]) -> list[str]:
    """Base lines [start, end) with one side's hunks applied."""
    out: list[str] = []
    cursor = start
    for hunk in hunks:
        out += base[cursor : hunk.start]
        out += hunk.lines
        cursor = hunk.end
    out += base[cursor:end]
    return out
