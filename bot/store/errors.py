"""Every error a store raises, whichever backend: callers catch these, never a library's."""

from __future__ import annotations

from dataclasses import dataclass


class StateError(Exception):
    """The state dir cannot be used (locked by another daemon, unreadable, corrupt)."""


class TaskBusy(StateError):
    """Another worker holds this task's lock."""


class DatabaseError(StateError):
    """The database could not be reached, or refused a statement (postgres backend)."""


class LeaseLost(StateError):
    """This daemon's lease on a task has expired or moved to another daemon: it must not act."""


@dataclass(frozen=True)
class Unreadable:
    where: str  # a task file's path, or a task key in the database
    reason: str
