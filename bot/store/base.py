"""The store interface both backends implement (structural: `typing.Protocol`)."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from bot.model.state import TaskState
from bot.model.thread import TaskKey
from bot.store.errors import LeaseLost, StateError, TaskBusy, Unreadable
from bot.store.index_view import IndexView

__all__ = [
    "ConversationLog",
    "DeliveryMemory",
    "Holder",
    "IndexView",
    "Lease",
    "LeaseLost",
    "QueuedJob",
    "StateError",
    "Store",
    "StoreIndex",
    "TaskBusy",
    "Unreadable",
]


class Lease(Protocol):
    """The right to work on one task. `token` grows with every claim of any task (a fencing
    token); `check()` raises `LeaseLost` unless the lease is still this one and unexpired (and
    extends it), so a side effect preceded by `check()` never comes from a daemon that was
    frozen past its lease. The files backend's lease is an flock: always held, token 0."""

    @property
    def token(self) -> int: ...

    def check(self) -> None: ...


class ConversationLog(Protocol):
    """The current run's conversation: append-only, each append durable before it returns."""

    def append(self, entry: dict[str, Any]) -> None: ...

    def entries(self) -> list[dict[str, Any]]: ...


class StoreIndex(Protocol):
    """Every task's status, cheaply (a poll must not read every task)."""

    def refresh(self) -> IndexView: ...

    def active_states(self, view: IndexView) -> list[TaskState]: ...


class DeliveryMemory(Protocol):
    """Webhook delivery ids (and body digests) already acted on."""

    def add_all(self, *keys: str) -> bool: ...


@dataclass(frozen=True)
class QueuedJob:
    """Work planned for a task: start a new run (`fresh`) or resume. Run by the daemon that
    planned it, or (postgres) queued for whichever daemon is free (`dispatch.Job`)."""

    key: TaskKey
    fresh: bool


@dataclass(frozen=True)
class Holder:
    """Who works on a task right now (`bot status`)."""

    daemon: str
    expires: datetime


class Store(Protocol):
    """Task state, conversations, leases; and, when `shared`, the work queue of several daemons.

    Writes through the store returned by `fenced(lease)` (save, conversation appends, archiving
    a run) are refused with `LeaseLost` once the lease has moved on; the files backend's
    `fenced` returns the store itself (its flock cannot move while the process lives)."""

    @property
    def shared(self) -> bool:
        """Several daemons may use this store at once (work is handed out by `take`)."""
        ...

    @property
    def where(self) -> str:
        """Where the state is, for messages: a directory, or the database (no password)."""
        ...

    # -- the daemon ---------------------------------------------------------------------------

    def open(self, daemon: str) -> None:
        """Take this store for a daemon named `daemon` (raises StateError: in use, or a schema
        this version does not know, with the fix)."""
        ...

    def close(self) -> None: ...

    # -- tasks --------------------------------------------------------------------------------

    def load(self, key: TaskKey) -> TaskState | None: ...

    def save(self, state: TaskState) -> None: ...

    def archived_changes(self, state: TaskState) -> dict[str, str | None]: ...

    def conversation(self, key: TaskKey) -> ConversationLog: ...

    def archived_conversation(self, key: TaskKey, run: int) -> list[dict[str, Any]]:
        """The conversation of an earlier run (kept for audit; empty when pruned or absent)."""
        ...

    def archive_run(self, key: TaskKey, run: int) -> None: ...

    def scan(self) -> tuple[list[TaskState], list[Unreadable]]: ...

    def all_states(self) -> list[TaskState]: ...

    def index(self) -> StoreIndex: ...

    def task_lock(self, key: TaskKey) -> AbstractContextManager[Lease]:
        """Claim `key` for this daemon (raises TaskBusy when another holds it); the lease is
        kept alive while the block runs and released when it ends."""
        ...

    def fenced(self, lease: Lease) -> Store: ...

    def remove(self, key: TaskKey, dry_run: bool = False) -> int:
        """Delete a task (its state, conversations, changesets); the bytes freed. Call it on
        `fenced(lease)` of a `task_lock` (LeaseLost, nothing deleted, once the lease moved on)."""
        ...

    def drop_old_runs(
        self, state: TaskState, before: datetime, dry_run: bool = False
    ) -> tuple[int, int]:
        """Delete the archived runs of `state`'s task last written before `before`: how many
        (files or runs) and the bytes freed."""
        ...

    def holders(self) -> dict[str, Holder]:
        """Task key -> the daemon holding it now (unexpired leases only)."""
        ...

    def deliveries(self) -> DeliveryMemory: ...

    # -- discovery ----------------------------------------------------------------------------

    def discovery_cursor(self, name: str) -> str | None:
        """What `save_discovery_cursor(name, ...)` last saved (None: never). With several
        daemons only the one leading a source's discovery reads and writes its cursors."""
        ...

    def save_discovery_cursor(self, name: str, value: str) -> None:
        """Keep `value` under `name`, durably, replacing what was there."""
        ...

    # -- shared work (postgres; the files backend never queues) --------------------------------

    def lead(self, role: str, seconds: float) -> bool:
        """Hold `role` (e.g. discovery of one source) for `seconds`: True when this daemon holds
        it now (taken or renewed), False when another daemon's claim is still fresh."""
        ...

    def enqueue(self, jobs: Iterable[QueuedJob]) -> None:
        """Queue jobs for any daemon (a job already queued for a key is kept, `fresh` ORed)."""
        ...

    def take(self, limit: int) -> list[QueuedJob]:
        """Up to `limit` queued jobs whose task no daemon holds, removed from the queue (a job
        lost with a dead daemon is planned again by the next discovery: the state is the
        truth)."""
        ...
