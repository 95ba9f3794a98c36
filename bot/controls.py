"""Pause, resume and stop from the thread: labels, and slash commands from trusted writers."""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

from bot.comments import NewComment
from bot.config import LabelSettings

_COMMAND = re.compile(r"^\s*/bot(?:\s+(pause|resume|stop|start))?\s*$", re.IGNORECASE)


class Command(StrEnum):
    START = "start"
    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"


def parse_command(body: str) -> Command | None:
    """A command is a comment whose first non-empty line is `/bot [verb]`."""
    for line in body.splitlines():
        if not line.strip():
            continue
        match = _COMMAND.match(line)
        if match is None:
            return None
        return Command((match.group(1) or "start").lower())
    return None


def split_commands(comments: Iterable[NewComment]) -> tuple[list[NewComment], list[Command]]:
    """Separate commands (only from trusted writers, edits ignored) from conversation."""
    talk: list[NewComment] = []
    commands: list[Command] = []
    for item in comments:
        command = parse_command(item.comment.body) if item.trusted and not item.edited else None
        if command is None:
            talk.append(item)
        else:
            commands.append(command)
    return talk, commands


class Decision(StrEnum):
    RUN = "run"
    PAUSE = "pause"
    STOP = "stop"


def decide(
    labels: frozenset[str], commands: Iterable[Command], settings: LabelSettings
) -> Decision:
    """What the thread asks for now.

    A paused task carries the paused label (the bot keeps it so), hence the label alone says
    whether to pause: added by a person it pauses, removed it resumes. The stopped label
    always stops. Then the commands, oldest first, so the newest one wins.
    """
    if settings.stopped in labels:
        return Decision.STOP
    pause = settings.paused in labels
    for command in commands:
        if command is Command.STOP:
            return Decision.STOP
        pause = command is Command.PAUSE
    return Decision.PAUSE if pause else Decision.RUN
