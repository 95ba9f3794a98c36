"""Reading an inbox (GitHub notifications, GitLab to-do items) without losing an item.

An inbox is read to the end, oldest item first, and each item is checked: `SKIPPED` (not the
bot's: another repository, a reason the bot does not act on), `HANDLED` (checked: a task to
start, or nothing to do) or `FAILED` (its check failed: it waits for the next read). Nothing is
marked read or done while reading. `MentionBatch.commit` does that afterwards, once the daemon
has planned the tasks: an item is settled (marked read/done) only when it needs no start or its
task's start is recorded (`Recorded`), and a cursor moves only up to the first item that is not
settled. So a failure anywhere leaves that item, and every later one the cursor covers, for the
next read; the items already settled are not lost either. Skipped items are never touched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Protocol, runtime_checkable

from bot.model.thread import TaskKey, TaskSummary

# Has the start of this task been recorded (its state saved)? Asked only for items that found a
# task to start.
Recorded = Callable[[TaskKey], bool]


class Cursors(Protocol):
    """Where discovery keeps its cursors (the store implements it: both backends)."""

    def discovery_cursor(self, name: str) -> str | None: ...

    def save_discovery_cursor(self, name: str, value: str) -> None: ...


class MemoryCursors:
    """Cursors of one process (a forge used without a store: tests, benchmarks)."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}
        self._lock = threading.Lock()

    def discovery_cursor(self, name: str) -> str | None:
        with self._lock:
            return self._values.get(name)

    def save_discovery_cursor(self, name: str, value: str) -> None:
        with self._lock:
            self._values[name] = value


class Outcome(Enum):
    SKIPPED = "skipped"
    HANDLED = "handled"
    FAILED = "failed"


@dataclass(frozen=True)
class Checked:
    """One inbox item after its check."""

    id: str
    updated_at: datetime
    outcome: Outcome
    summary: TaskSummary | None = None  # HANDLED with a task to start (or to look at)


def settled(items: Iterable[Checked], recorded: Recorded) -> tuple[list[Checked], Checked | None]:
    """The items that may be marked read/done now, and the first one that may not (None: all
    could), in the items' order. A skipped item is neither."""
    done: list[Checked] = []
    first_open: Checked | None = None
    for item in items:
        if item.outcome is Outcome.SKIPPED:
            continue
        if item.outcome is Outcome.HANDLED and (item.summary is None or recorded(item.summary.key)):
            done.append(item)
        elif first_open is None:
            first_open = item
    return done, first_open


def _nothing(_recorded: Recorded) -> None:
    return None


@dataclass
class MentionBatch:
    """What one read of an inbox found, and how to settle it once the tasks are recorded."""

    tasks: list[TaskSummary] = field(default_factory=list)
    commit: Callable[[Recorded], None] = _nothing


class MentionInbox(Protocol):
    """A forge whose inbox names the threads where the bot was called (optional capability)."""

    def mention_batch(self, repos: Sequence[str], cursors: Cursors | None = None) -> MentionBatch:
        """Read the inbox; settle nothing until `commit` is called on the answer."""
        ...


@runtime_checkable
class ThreadTodos(Protocol):
    """A forge whose inbox items can be found per thread (GitLab To-Do items): a thread a
    webhook named settles its own items without waiting for the next read."""

    def mention_todos(self, key: TaskKey) -> list[str]: ...

    def todos_done(self, ids: Sequence[str]) -> None: ...


def always(_key: TaskKey) -> bool:
    """`Recorded` for callers without a store: a task found counts as recorded at once."""
    return True
