"""The `/bot` commands of trusted writers: parsed, split from the talk, and read back on a
finished task. What they decide, with the labels, is bot/task/handover.py's."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from bot.core.clock import format_time, parse_time
from bot.forge.base import Forge
from bot.model.grant import PLAIN, Grant, parse_grant
from bot.model.state import TaskState
from bot.model.thread import TaskKey
from bot.model.trust import Identity, NewComment, Trust

# `/bot resume` may carry one word more: what it grants after a cap (bot/model/grant.py).
_COMMAND = re.compile(
    r"^\s*/bot(?:\s+(pause|resume|stop|start)(?:(?<=resume)\s+(?P<grant>\S.*?))?)?\s*$",
    re.IGNORECASE,
)


# `/bot resume` with a word that is no grant (`/bot resume lots`): no command, as before, but
# a task paused at a cap answers it (bot/task/safepoint.py).
_ASKED = re.compile(r"^\s*/bot\s+resume\s+(?P<word>\S.*?)\s*$", re.IGNORECASE)


class Command(StrEnum):
    START = "start"
    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"


UNPAUSE = frozenset({Command.RESUME, Command.START})


def parse_command(body: str) -> Command | None:
    """A command is a comment whose first non-empty line is `/bot [verb]`."""
    parsed = parse_control(body)
    return None if parsed is None else parsed[0]


def parse_control(body: str) -> tuple[Command, Grant] | None:
    """The command and, for `/bot resume <more>`, what it grants (else `PLAIN`)."""
    for line in body.splitlines():
        if not line.strip():
            continue
        match = _COMMAND.match(line)
        if match is None:
            return None
        command = Command((match.group(1) or "start").lower())
        if match["grant"] is None:
            return command, PLAIN
        grant = parse_grant(match["grant"])
        return None if grant is None else (command, grant)
    return None


def refused_grant(body: str) -> str | None:
    """The word of a `/bot resume <word>` on the first non-empty line that grants nothing
    (`lots`, `0x`, `101x`), else None."""
    for line in body.splitlines():
        if not line.strip():
            continue
        match = _ASKED.match(line)
        if match is None or parse_grant(match["word"]) is not None:
            return None
        return match["word"]
    return None


class Control(NamedTuple):
    command: Command
    grant: Grant  # `PLAIN` but for a resume that asks for more
    at: datetime  # when it was written


@dataclass(frozen=True)
class Split:
    talk: list[NewComment]  # for the model (a command's extra lines included)
    commands: list[Command]  # oldest first
    pure: list[NewComment]  # comments that were nothing but a command
    # Comments whose command is obeyed now and whose other text is in `talk`.
    obeyed: list[NewComment] = field(default_factory=list)
    times: list[datetime] = field(default_factory=list)  # when each command was written
    grants: list[Grant] = field(default_factory=list)  # what each grants (`PLAIN` but resume)
    # Talk from writers that is `/bot resume <word>` with no grant: each with its word.
    asks: list[tuple[NewComment, str]] = field(default_factory=list)

    def counted(self, at: datetime | None = None) -> list[Control]:
        """The commands written after `at` (None: all; one second is a tie: not after)."""
        every = zip(self.commands, self.grants, self.times, strict=True)
        return [Control(c, g, when) for c, g, when in every if at is None or when > at]


def split_commands(
    comments: Iterable[NewComment], obeyed: Mapping[str, str] | None = None
) -> Split:
    """Separate commands (only from trusted writers, edits ignored) from conversation.

    `/bot pause` on its first line, more text below: the command is obeyed and the text is
    still delivered, without the command line. A version in `obeyed` had its command obeyed
    at an earlier check (its text waited): only its text is left.
    """
    split = Split([], [], [])
    done = obeyed or {}
    for item in comments:
        parsed = parse_control(item.comment.body) if item.trusted and not item.edited else None
        if parsed is None:
            split.talk.append(item)
            word = refused_grant(item.comment.body) if item.trusted and not item.edited else None
            if word is not None:
                split.asks.append((item, word))
            continue
        rest = _after_command(item.comment.body)
        again = done.get(item.comment.id, "") >= format_time(item.comment.updated_at)
        if not again:
            split.commands.append(parsed[0])
            split.grants.append(parsed[1])
            split.times.append(item.comment.created_at)
        if rest:
            split.talk.append(replace(item, comment=replace(item.comment, body=rest)))
            if not again:
                split.obeyed.append(item)
        elif not again:
            split.pure.append(item)
    return split


def _after_command(body: str) -> str:
    lines = body.strip().splitlines()
    return "\n".join(lines[1:]).strip()


def commands_since_finish(
    forge: Forge, key: TaskKey, state: TaskState, identity: Identity, trust: Trust
) -> list[Command]:
    """The commands writers wrote on a finished task since it finished, oldest first (a
    version seen before, the bot's and other bots' comments, and untrusted ones aside):
    whether they hand it back is `bot/task/handover.py`'s to say."""
    since = parse_time(state.comments_since) if state.comments_since else None
    commands = []
    for comment in forge.list_comments(key, since=since):
        seen = state.seen.get(comment.id)
        if seen is not None and seen >= format_time(comment.updated_at):
            continue
        if comment.author_is_bot or identity.ignores(comment.author) or not trust.trusted(comment):
            continue
        command = parse_command(comment.body)
        if command is not None:
            commands.append(command)
    return commands
