"""Task rows: state written (fenced or not), read, indexed; changesets of finished runs.

Like the files backend, a finished task's changeset is kept apart from its state (a changesets
row, named in `state.changes_file` as the files backend names its file), so that both backends
hold the same state document and `bot db import` / `export` copy it unchanged.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg

from bot.core.log import get_logger
from bot.model.state import Status, TaskState
from bot.store.errors import LeaseLost, StateError, Unreadable
from bot.store.index_view import Entry, IndexView
from bot.store.pg_lease import LIVE, PgLease
from bot.store.pg_pool import Pool
from bot.store.serial import json_text, parse_state, state_json
from bot.store.transfer import TaskRecord

log = get_logger(__name__)

_UPSERT = """
INSERT INTO tasks (key, status, state) VALUES (%(key)s, %(status)s, %(state)s::json)
ON CONFLICT (key) DO UPDATE
    SET status = excluded.status, state = excluded.state, updated_at = now()
"""
_UPDATE_FENCED = f"""
UPDATE tasks SET status = %(status)s, state = %(state)s::json, updated_at = now() WHERE {LIVE}
"""
_CHANGESET = """
INSERT INTO changesets (key, run, changes) VALUES (%(key)s, %(run)s, %(changes)s::json)
ON CONFLICT (key, run) DO UPDATE SET changes = excluded.changes, written_at = now()
    WHERE changesets.changes::text IS DISTINCT FROM excluded.changes::text
"""
_CHANGES_FILE = re.compile(r"^changes\.run(\d+)\.json$")


def changes_name(run: int) -> str:
    return f"changes.run{run}.json"


def write_state(conn: psycopg.Connection[Any], state: TaskState, fence: PgLease | None) -> None:
    """One task's state (and a finished run's changeset) in the caller's transaction."""
    stored = state
    changes: str | None = None
    if state.status.terminal and state.changes:
        changes = json_text(state.changes)
        state.changes_file = changes_name(state.run)
        stored = state.model_copy(update={"changes": {}})
    params: dict[str, object] = {
        "key": state.key,
        "status": state.status.value,
        "state": state_json(stored).decode("utf-8"),
        "run": state.run,
        "changes": changes,
    }
    if fence is None:
        conn.execute(_UPSERT, params)
    else:
        params["token"] = fence.token
        if conn.execute(_UPDATE_FENCED, params).rowcount == 0:
            raise LeaseLost(f"the lease on task {state.key} was lost: state not saved")
    if changes is not None:
        conn.execute(_CHANGESET, params)


def read_state(pool: Pool, key: str) -> TaskState | None:
    with pool.connection() as conn:
        return _read_state(conn, key)


def _read_state(conn: psycopg.Connection[Any], key: str) -> TaskState | None:
    row = conn.execute(
        "SELECT state::text FROM tasks WHERE key = %s AND state IS NOT NULL", (key,)
    ).fetchone()
    if row is None:
        return None
    try:
        return parse_state(str(row[0]).encode())
    except StateError as exc:
        raise StateError(f"task {key} in the database: {exc}") from None


def archived_changes(pool: Pool, state: TaskState) -> dict[str, str | None]:
    if state.changes or state.changes_file is None:
        return dict(state.changes)
    match = _CHANGES_FILE.match(state.changes_file)
    run = int(match.group(1)) if match else state.run
    changes = read_changeset(pool, state.key, run)
    if changes is None:
        raise StateError(f"task {state.key}: the changeset of run {run} is missing")
    return changes


def read_changeset(pool: Pool, key: str, run: int) -> dict[str, str | None] | None:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT changes FROM changesets WHERE key = %s AND run = %s", (key, run)
        ).fetchone()
    return None if row is None else dict(row[0])


def scan(pool: Pool) -> tuple[list[TaskState], list[Unreadable]]:
    states: list[TaskState] = []
    unreadable: list[Unreadable] = []
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT key, state::text FROM tasks WHERE state IS NOT NULL ORDER BY key"
        ).fetchall()
    for key, text in rows:
        try:
            states.append(parse_state(str(text).encode()))
        except StateError as exc:
            unreadable.append(Unreadable(str(key), str(exc)))
    return states, unreadable


class PgIndex:
    """Every task's status in one query on the status column (no state is read)."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def refresh(self) -> IndexView:
        view = IndexView()
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT key, status FROM tasks WHERE state IS NOT NULL ORDER BY key"
            ).fetchall()
        for key, status in rows:
            try:
                view.entries[key] = Entry(key, Status(status), None)
            except ValueError:
                view.unreadable[key] = "not a valid task state: status"
        return view

    def active_states(self, view: IndexView) -> list[TaskState]:
        """The running and paused tasks of `view`, read from their rows (the truth)."""
        keys = [str(key) for key in view.active()]
        if not keys:
            return []
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT key, state::text FROM tasks WHERE key = ANY(%s) AND state IS NOT NULL"
                " ORDER BY key",
                (keys,),
            ).fetchall()
        states = []
        for key, text in rows:
            try:
                states.append(parse_state(str(text).encode()))
            except StateError as exc:
                log.error("state_unreadable", task=key, error=str(exc))
        return states


# -- copying whole tasks (bot db import / export) ----------------------------------------------


def export_task(pool: Pool, key: str) -> TaskRecord | None:
    """One task whole, read in one snapshot: a daemon working on it meanwhile (a run archived,
    another started) cannot give this run's state with the next run's conversation."""
    with pool.connection() as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        state = _read_state(conn, key)
        if state is None:
            return None
        record = TaskRecord(state)
        rows = conn.execute(
            "SELECT run, entry FROM conversation WHERE key = %s ORDER BY run, id", (key,)
        ).fetchall()
        for run, entry in rows:
            (record.runs.setdefault(run, []) if run else record.conversation).append(entry)
        for run, changes in conn.execute(
            "SELECT run, changes FROM changesets WHERE key = %s ORDER BY run", (key,)
        ).fetchall():
            record.changesets[run] = dict(changes)
    return record


# The task's row, locked for the import's transaction (made first if it is not there).
_IMPORT_SLOT = """
INSERT INTO tasks (key) VALUES (%(key)s) ON CONFLICT (key) DO NOTHING
"""
_IMPORT_LOCK = """
SELECT state IS NOT NULL, lease_owner, lease_expires > now() FROM tasks
WHERE key = %(key)s FOR UPDATE
"""


def import_task(pool: Pool, record: TaskRecord) -> None:
    """The whole task in one transaction, `updated_at` as it was; its lease is not touched.

    Only into an empty place: a task a daemon holds, or one saved since the caller looked
    (a daemon running meanwhile), is refused (StateError), never overwritten."""
    key = record.state.key
    conversation = [(0, entry) for entry in record.conversation]
    for run, entries in sorted(record.runs.items()):
        conversation.extend((run, entry) for entry in entries)
    with pool.connection() as conn, conn.transaction(), conn.cursor() as cursor:
        cursor.execute(_IMPORT_SLOT, {"key": key})
        row = cursor.execute(_IMPORT_LOCK, {"key": key}).fetchone()
        if row is not None and row[2]:
            raise StateError(
                f"task {key} is being worked on by daemon {row[1]}: nothing of it was"
                " imported; stop the daemons using the database, then import again"
            )
        if row is not None and row[0]:
            raise StateError(
                f"task {key} was written in the database while importing: it was left as"
                " it is there; import again to copy the rest"
            )
        cursor.execute(_UPSERT, {
            "key": key,
            "status": record.state.status.value,
            "state": state_json(record.state).decode("utf-8"),
        })  # fmt: skip
        cursor.execute("DELETE FROM conversation WHERE key = %s", (key,))
        cursor.execute("DELETE FROM changesets WHERE key = %s", (key,))
        cursor.executemany(
            "INSERT INTO conversation (key, run, entry) VALUES (%s, %s, %s::json)",
            [(key, run, json_text(entry)) for run, entry in conversation],
        )
        cursor.executemany(
            "INSERT INTO changesets (key, run, changes) VALUES (%s, %s, %s::json)",
            [(key, run, json_text(changes)) for run, changes in sorted(record.changesets.items())],
        )
