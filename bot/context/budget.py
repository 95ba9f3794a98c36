"""Budget primitives: truncate to a token count, allocate a total over sections, shorten lists.

All counts are exact (`TokenCounter`); every function here guarantees its result fits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.context.tokens import TokenCounter

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
HEAD_MIN = 48  # tokens `keep_ends` keeps for the beginning beyond its first lines


def _open_fence(lines: Sequence[str]) -> str | None:
    """The fence still open at the end of `lines`, if any."""
    return _fence_states(lines)[-1]


def _fence_states(lines: Sequence[str]) -> list[str | None]:
    """The fence open before each line, and after the last (one more entry than lines)."""
    open_fence: str | None = None
    states: list[str | None] = [None]
    for line in lines:
        match = _FENCE.match(line)
        if match:
            mark = match.group(1)
            if open_fence is None:
                open_fence = mark
            elif (
                mark[0] == open_fence[0]
                and len(mark) >= len(open_fence)
                and not line.strip()[len(mark) :]
            ):
                open_fence = None
        states.append(open_fence)
    return states


def close_fences(text: str) -> str:
    """People's text may open a code fence and never close it; close it so the rest of the
    context is not swallowed into a code block."""
    fence = _open_fence(text.split("\n"))
    return f"{text}\n{fence}" if fence else text


def truncate(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Cut `text` to at most `max_tokens`, on a line boundary where it can.

    Appends `... (truncated: N more lines)` and closes a code fence the cut left open.
    """
    if counter.count(text) <= max_tokens:
        return text
    lines = text.split("\n")
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = counter.count(line + "\n")
        if used + cost > max_tokens:
            break
        kept.append(line)
        used += cost
    while True:
        result = _finish_cut(kept, len(lines) - len(kept), max_tokens, counter, lines)
        if result is not None:
            return result
        if not kept:
            return ""
        kept.pop()


def _finish_cut(
    kept: list[str], dropped: int, max_tokens: int, counter: TokenCounter, lines: list[str]
) -> str | None:
    partial = ""
    if not kept and lines:
        # Not even one whole line fits: cut inside the first line rather than return nothing.
        partial = _cut_line(lines[0], max_tokens // 2, counter)
        dropped = len(lines) - 1
    body = kept + ([partial] if partial else [])
    fence = _open_fence(body)
    tail = ([fence] if fence else []) + [f"... (truncated: {dropped} more lines)"]
    result = "\n".join(body + tail)
    return result if counter.count(result) <= max_tokens else None


def _cut_line(line: str, max_tokens: int, counter: TokenCounter) -> str:
    if max_tokens <= 0:
        return ""
    text = counter.decode(counter.encode(line)[:max_tokens]).rstrip("\ufffd")
    while text and counter.count(text) > max_tokens:
        text = text[:-1]
    return text


@dataclass(frozen=True)
class Section:
    name: str
    wanted: int  # tokens the section would use in full
    share: float  # fraction of the total it may claim
    floor: int = 0  # guaranteed minimum (may exceed the share)


def allocate(total: int, sections: Sequence[Section]) -> dict[str, int]:
    """Split `total` tokens: floors first, then shares, then what is left to the hungry ones.

    A floor can exceed a share; the sum is still capped at `total`, enforced last by cutting
    the largest grants first.
    """
    grant = {s.name: min(s.wanted, s.floor) for s in sections}
    for s in sections:
        grant[s.name] = max(grant[s.name], min(s.wanted, int(total * s.share)))
    left = total - sum(grant.values())
    hungry = [s for s in sections if grant[s.name] < s.wanted]
    while left > 0 and hungry:
        each = max(1, left // len(hungry))
        for s in list(hungry):
            extra = min(each, s.wanted - grant[s.name], left)
            grant[s.name] += extra
            left -= extra
            if grant[s.name] >= s.wanted:
                hungry.remove(s)
            if left <= 0:
                break
    overflow = sum(grant.values()) - total
    floors = {s.name: min(s.wanted, s.floor) for s in sections}
    # The cap is enforced last: first from what sections got above their floors, largest
    # first, then (only if the floors alone exceed the total) from the floors themselves.
    for limit in (floors, dict.fromkeys(grant, 0)):
        for name in sorted(grant, key=lambda n: grant[n] - limit[n], reverse=True):
            if overflow <= 0:
                break
            cut = min(overflow, grant[name] - limit[name])
            grant[name] -= cut
            overflow -= cut
    return grant


def dedupe(items: Iterable[str]) -> list[str]:
    """Identical entries once, first occurrence kept."""
    return list(dict.fromkeys(items))


def shorten_list(items: Sequence[str], keep: int) -> str:
    """`a, b, c, ... (+N more)`."""
    if len(items) <= keep:
        return ", ".join(items)
    return f"{', '.join(items[:keep])}, ... (+{len(items) - keep} more)"


def cut_head(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The beginning of `text` in at most `max_tokens`: whole lines, then as much of the next
    line as fits, so a one-paragraph body (a long Japanese line) still shows its start.

    Like `truncate`, closes a fence the cut left open and says how many lines were left out.
    """
    if counter.count(text) <= max_tokens:
        return text
    lines = text.split("\n")
    room = max_tokens - 10  # the "truncated" line (a fence closer is made room for below)
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = counter.count(line + "\n")
        if used + cost > room:
            break
        kept.append(line)
        used += cost
    rest = lines[len(kept) :]
    partial = _cut_line(rest[0], room - used - 1, counter) if rest else ""
    while True:
        body = kept + ([partial + "…"] if partial else [])
        fence = _open_fence(body)
        dropped = len(lines) - len(kept) - (1 if partial else 0)
        tail = ([fence] if fence else []) + [f"... (truncated: {dropped} more lines)"]
        result = "\n".join(body + tail)
        if counter.count(result) <= max_tokens:
            return result
        if partial:
            partial = partial[: len(partial) // 2]
        elif kept:
            kept.pop()
        else:
            return ""


def keep_ends(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The beginning and the end of `text` in at most `max_tokens`, the middle cut out.

    For a rendered opening context that must shrink after the fact: its beginning is the
    thread's title and first lines, its end the newest comments and the list of what was left
    out. The text is taken as parts separated by blank lines (outside code fences; quoted text
    never holds a blank line), so the end is whole parts from the last one back, and a part
    too long to keep whole keeps its first lines: a comment never loses its header and trust
    mark. The end is measured first; the beginning gets what is left.
    """
    if counter.count(text) <= max_tokens:
        return text
    lines = text.split("\n")
    states = _fence_states(lines)
    starts = [0] + [n for n in range(1, len(lines)) if lines[n - 1] == "" and states[n] is None]
    bounds = list(zip(starts, [*starts[1:], len(lines)], strict=True))
    room = max_tokens - 24  # the cut marker and a fence closer
    first = sum(counter.count(line + "\n") for line in lines[:4])
    tail_room = room - min(first + HEAD_MIN, room // 2)
    tail: list[str] = []
    k = len(bounds)
    while k > 1:
        part = "\n".join(lines[bounds[k - 1][0] : bounds[k - 1][1]])
        left = tail_room - counter.count("\n".join(tail) + "\n")
        if counter.count(part + "\n") <= left:
            tail.insert(0, part)
            k -= 1
            continue
        if left > 24:  # too long whole: its first lines, with the header
            cut = cut_head(part.rstrip("\n"), left - 2, counter)
            if cut:
                tail.insert(0, cut + "\n")
                k -= 1
        break
    end = bounds[k][0] if k < len(bounds) else len(lines)
    head_room = room - counter.count("\n".join(tail) + "\n")
    head: list[str] = []
    used = h = 0
    while h < end and used + counter.count(lines[h] + "\n") <= head_room:
        used += counter.count(lines[h] + "\n")
        head.append(lines[h])
        h += 1
    if h < end and head_room - used > 8:
        partial = _cut_line(lines[h], head_room - used - 2, counter)
        head += [partial + "…"] if partial else []
    fence = _open_fence(head)
    head += [fence] if fence else []
    marker = f"... ({max(end - h, 1)} lines cut here to fit the context window) ...\n"
    result = "\n".join([*head, marker, *tail])
    return result if counter.count(result) <= max_tokens else cut_head(text, max_tokens, counter)
