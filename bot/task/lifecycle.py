"""Status and labels of one task: every transition is saved before the thread is told.

Order for every change of status: the state on disk first (with the intent of the comment
that announces it, if any), then the comment, then the labels. A crash between any two of
these is repaired on the next run: the intent is looked up by its marker, and labels that
do not match the saved status (`labels_applied`) are synced again.
"""

from __future__ import annotations

from bot.core.config import LabelSettings
from bot.core.log import get_logger
from bot.forge.base import Forge
from bot.model.state import Status, TaskState
from bot.model.thread import TaskKey
from bot.store.base import Store
from bot.task.comments import CommentDetectionManager
from bot.task.labels import sync_labels
from bot.task.outcome import Outcome
from bot.task.posting import Poster
from bot.task.record import Events

log = get_logger(__name__)

PAUSED_NOTE = "Paused. Remove the paused label or comment `/bot resume` to continue."
RESUMED_NOTE = "Resumed where I left off."
STOPPED_NOTE = "Stopped as asked. The task state is kept; re-add the trigger label to start over."
CLOSED_NOTE = (
    "This thread was closed, so I stopped. Reopen it and add the trigger label to start again."
)


class Lifecycle:
    def __init__(
        self,
        forge: Forge,
        store: Store,
        key: TaskKey,
        labels: LabelSettings,
        detector: CommentDetectionManager,
        poster: Poster,
        events: Events | None = None,
    ) -> None:
        self.forge = forge
        self.store = store
        self.key = key
        self.label_settings = labels
        self.detector = detector
        self.poster = poster
        # Every status change on record in the conversation, after the state that has it.
        self.events = events or Events()
        self.state = TaskState(key=str(key))
        self.labels: frozenset[str] = frozenset()  # the thread's labels as last read

    def adopt(self, state: TaskState) -> None:
        self.state = state
        self.poster.state = state

    def save(self) -> None:
        """The task state with the comment detector's delivery record, atomically."""
        detector = self.detector.get_state()
        self.state.seen = detector["seen"]
        self.state.comments_since = detector["since"]
        self.store.save(self.state)

    def sync_labels(self) -> None:
        sync_labels(self.forge, self.key, self.state.status, self.label_settings, self.labels)
        self.state.labels_applied = self.state.status
        self.store.save(self.state)

    def start(self) -> None:
        self.state.initialized = True
        self.state.status = Status.RUNNING
        self.save()
        self.events.status(Status.RUNNING, "started")
        self.sync_labels()

    def pause(self) -> Outcome:
        if self.state.status is Status.PAUSED:
            self.save()  # already paused: one control check, nothing said again
            if self.state.labels_applied != Status.PAUSED:
                self.sync_labels()
            return Outcome.PAUSED
        self.state.status = Status.PAUSED
        self.save()
        self.events.status(Status.PAUSED, self.state.reason)
        self.sync_labels()
        self.poster.post("paused", PAUSED_NOTE)
        log.info("task_paused", step=self.state.step)
        return Outcome.PAUSED

    def resume(self) -> None:
        self.state.status = Status.RUNNING
        self.save()
        self.events.status(Status.RUNNING, "resumed")
        self.sync_labels()
        self.poster.post("resumed", RESUMED_NOTE)
        log.info("task_resumed", step=self.state.step)

    def stop(self) -> Outcome:
        self.end(Status.STOPPED, STOPPED_NOTE)
        return Outcome.STOPPED

    def fail(self, reason: str) -> Outcome:
        log.error("task_failed", reason=reason)
        self.end(Status.FAILED, f"I could not finish this task: {reason}.")
        return Outcome.FAILED

    def closed(self) -> Outcome:
        """The thread was closed (or merged): stop; say so only if we had said anything."""
        published = bool(self.state.posted) or self.state.commit_sha is not None
        log.info("task_thread_closed", step=self.state.step, published=published)
        self.end(Status.STOPPED, CLOSED_NOTE if published else None, reason="closed")
        return Outcome.STOPPED

    def gone(self, status: int | None) -> Outcome:
        """The thread was deleted: nothing to tell and nothing to label; the state is kept."""
        log.warning("task_thread_gone", status=status)
        self.state.status = Status.STOPPED
        self.state.reason = "deleted"
        self.state.labels_applied = Status.STOPPED  # there are no labels left to sync
        self.save()
        self.events.status(Status.STOPPED, "deleted")
        return Outcome.STOPPED

    def end(self, status: Status, comment: str | None, reason: str | None = None) -> None:
        """Status and the closing comment's intent in one save, then post, then labels."""
        self.state.status = status
        if reason is not None:
            self.state.reason = reason
        else:
            self.state.reason = comment if status is not Status.DONE else None
        if comment is not None:
            self.poster.intend(status.value, comment)
        self.save()
        self.events.status(status, self.state.reason)
        if comment is not None:
            self.poster.deliver(look_up=False)
        self.sync_labels()
