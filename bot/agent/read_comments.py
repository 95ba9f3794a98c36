"""Comments by their number in the opening context, for the read_comments tool."""

from __future__ import annotations

from bot.context.budget import truncate
from bot.context.render import NumberedComment, comment_line
from bot.context.tokens import TokenCounter
from bot.forge.base import Forge
from bot.model.thread import TaskKey
from bot.model.trust import Trust


def read_comments(
    forge: Forge,
    key: TaskKey,
    legend: dict[str, str],
    numbers: list[int],
    trust: Trust,
    counter: TokenCounter,
    budget: int,
) -> str:
    """Comments by their number in the opening context (for those it left out)."""
    wanted = {legend[str(n)]: n for n in numbers if str(n) in legend}
    unknown = [n for n in numbers if str(n) not in legend]
    comments = [c for c in forge.list_comments(key) if c.id in wanted]
    parts = [
        comment_line(NumberedComment(wanted[c.id], c, trust.trusted(c)), c.body)
        for c in sorted(comments, key=lambda c: wanted[c.id])
    ]
    if unknown:
        parts.append(f"(no comment numbered {', '.join(map(str, unknown))})")
    return truncate("\n".join(parts) or "no such comments", budget, counter)
