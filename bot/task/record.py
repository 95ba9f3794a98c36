"""What a run records beside the model's messages, in the same conversation (no second log).

`Stamped` puts the time on every entry the run appends (`at`, ISO 8601 UTC, on the daemon's
injected clock). `Events` appends the run's own doings as entries of role `event`: status
changes (pause, resume, the end), comments posted, publication, what the checks did, controls
ignored (a label from someone without write access), errors that ended a run. The model never
sees them (`bot/agent/history.py` `visible` keeps only the chat roles); the timeline reads them
(`bot/task/timeline.py`). Each is appended after the state that it reports is saved (or the
comment that says it is posted): a crash between the two loses the entry, never repeats it.
"""

from __future__ import annotations

from typing import Any

from bot.agent.commands import CheckReport
from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.model.state import Status
from bot.model.thread import ControlEvent
from bot.repo.publish import Published
from bot.store.base import ConversationLog


def stamp(clock: Clock) -> str:
    """Now, as entries carry it: milliseconds, UTC, `Z`."""
    return clock.now().isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Stamped:
    """A `ConversationLog` whose appends carry `at` (an entry that has one keeps it)."""

    def __init__(self, log: ConversationLog, clock: Clock = SYSTEM_CLOCK) -> None:
        self.log = log
        self.clock = clock

    def append(self, entry: dict[str, Any]) -> None:
        self.log.append({"at": stamp(self.clock), **entry})

    def entries(self) -> list[dict[str, Any]]:
        return self.log.entries()


class Events:
    """The run's event entries; with no log (a part used on its own) nothing is recorded."""

    def __init__(self, log: ConversationLog | None = None) -> None:
        self.log = log

    def status(self, status: Status, reason: str | None = None) -> None:
        self._add("status", status=status.value, reason=reason)

    def posted(self, purpose: str, seq: int, comment_id: str) -> None:
        self._add("posted", purpose=purpose, seq=seq, comment=comment_id)

    def published(self, published: Published) -> None:
        self._add(
            "published",
            branch=published.branch,
            repo=published.repo,
            commit=published.commit,
            request=published.request_url,
            draft=published.draft,
            patch=published.patch is not None,
        )

    def checks(self, reports: list[CheckReport] | None) -> None:
        """What the repository's checks did (None: running commands is not enabled)."""
        done = [
            {
                "command": r.command,
                "outcome": r.outcome,
                "ok": r.ok,
                "duration": round(r.duration, 3),
            }
            for r in reports or []
        ]
        self._add("checks_run", enabled=reports is not None, checks=done)

    def ignored(self, event: ControlEvent) -> None:
        """A control from someone who may not give it (bot/task/gate.py), undone and said."""
        self._add("ignored", control=event.kind, name=event.name, actor=event.actor)

    def error(self, source: str, error: str, retry_at: str | None = None) -> None:
        """A run ended by an error it may recover from (`source`: forge, model)."""
        self._add("error", source=source, error=error, retry_at=retry_at)

    def _add(self, kind: str, **fields: Any) -> None:
        if self.log is not None:
            # `content` like every message entry (None: nothing for the model; readers of the
            # conversation that take each entry's content keep working).
            self.log.append({"role": "event", "kind": kind, "content": None, **fields})
