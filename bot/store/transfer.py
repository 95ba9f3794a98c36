"""Copying every task from one store to another: `bot db import` (files -> postgres) and
`bot db export` (postgres -> files).

A task is copied whole (state as stored, current conversation, archived runs' conversations,
changesets of finished runs) and written as it was: `updated_at` is kept, so `bot prune` ages
copied tasks as it aged the originals. A task already in the destination is left alone when it
is the same, and refused (nothing copied) when it differs: a copy never overwrites work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.model.state import TaskState
from bot.model.thread import TaskKey
from bot.store.base import Store
from bot.store.errors import StateError

Entries = list[dict[str, Any]]
Changeset = dict[str, str | None]


@dataclass
class TaskRecord:
    """One task whole, as its store keeps it."""

    state: TaskState
    conversation: Entries = field(default_factory=list)
    runs: dict[int, Entries] = field(default_factory=dict)  # archived run -> its conversation
    changesets: dict[int, Changeset] = field(default_factory=dict)  # finished run -> changes


class Portable(Store, Protocol):
    """A store tasks can be copied out of and into (both backends)."""

    def export_task(self, key: TaskKey) -> TaskRecord | None: ...

    def import_task(self, record: TaskRecord) -> None:
        """Write `record` as it is (no timestamp changed), replacing what the store had."""
        ...


def copy_store(src: Portable, dst: Portable) -> int:
    """Copy every task of `src` into `dst`; how many were written (identical ones are not)."""
    states, unreadable = src.scan()
    if unreadable:
        named = ", ".join(f"{bad.where} ({bad.reason})" for bad in unreadable[:5])
        raise StateError(f"{len(unreadable)} unreadable tasks in {src.where}: {named}")
    records = []
    for state in states:
        record = src.export_task(state.task_key())
        if record is None:
            continue  # removed meanwhile
        there = dst.export_task(state.task_key())
        if there == record:
            continue
        if there is not None:
            raise StateError(
                f"task {state.key} is already in {dst.where} and differs from the one in"
                f" {src.where}: nothing was copied; remove it there first"
            )
        records.append(record)
    for record in records:
        dst.import_task(record)
    return len(records)
