"""What a store's index answers: every task's key and status, and the tasks it could not read;
the same shape from both backends (the Store protocol names it, so no backend is imported)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bot.model.state import Status
from bot.model.thread import TaskKey

Signature = tuple[int, int, int]


@dataclass(frozen=True)
class Entry:
    key: str
    status: Status
    signature: Signature | None  # None: read the file again next time


@dataclass
class IndexView:
    entries: dict[str, Entry] = field(default_factory=dict)  # task dir (relative) -> entry
    unreadable: dict[str, str] = field(default_factory=dict)  # task dir -> reason
    bytes_read: int = 0

    def counts(self) -> Counter[str]:
        return Counter(entry.status.value for entry in self.entries.values())

    def active(self) -> list[TaskKey]:
        """Tasks a poll must never forget: running (resume) or paused (watch the controls)."""
        wanted = (Status.RUNNING, Status.PAUSED)
        return sorted(TaskKey.parse(e.key) for e in self.entries.values() if e.status in wanted)
