"""Conversations in the database: run 0 is the current run's, an archived run keeps its number.

A fenced append or archive carries the lease's condition in the statement itself, with a share
lock on the task's row: a daemon claiming the task waits until the write has committed, and a
write whose lease has moved on changes nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.model.thread import TaskKey
from bot.store.errors import LeaseLost
from bot.store.pg_lease import LIVE, PgLease
from bot.store.pg_pool import Pool
from bot.store.serial import json_text

_APPEND = "INSERT INTO conversation (key, run, entry) VALUES (%(key)s, 0, %(entry)s::json)"
_APPEND_FENCED = f"""
INSERT INTO conversation (key, run, entry)
SELECT %(key)s, 0, %(entry)s::json
WHERE EXISTS (SELECT 1 FROM tasks WHERE {LIVE} FOR SHARE)
"""
_ENTRIES = "SELECT entry FROM conversation WHERE key = %(key)s AND run = %(run)s ORDER BY id"
# One statement: the guard (locked once), then the old copy of the run and the move.
_ARCHIVE = """
WITH guard AS ({guard}),
gone AS (
    DELETE FROM conversation WHERE key = %(key)s AND run = %(run)s
    AND EXISTS (SELECT 1 FROM guard)
),
moved AS (
    UPDATE conversation SET run = %(run)s WHERE key = %(key)s AND run = 0
    AND EXISTS (SELECT 1 FROM guard)
)
SELECT count(*) FROM guard
"""
_OLD_RUNS = """
SELECT 'conversation', run, sum(octet_length(entry::text)) FROM conversation
WHERE key = %(key)s AND run BETWEEN 1 AND %(below)s - 1
GROUP BY run HAVING max(written_at) < %(before)s
UNION ALL
SELECT 'changeset', run, octet_length(changes::text) FROM changesets
WHERE key = %(key)s AND run < %(below)s AND written_at < %(before)s
"""


class PgConversation:
    def __init__(self, pool: Pool, key: TaskKey, fence: PgLease | None) -> None:
        self._pool = pool
        self._key = str(key)
        self._fence = fence

    def append(self, entry: dict[str, Any]) -> None:
        params: dict[str, object] = {
            "key": self._key,
            "entry": json_text(entry),
        }
        with self._pool.connection() as conn:
            if self._fence is None:
                conn.execute(_APPEND, params)
                return
            params["token"] = self._fence.token
            if conn.execute(_APPEND_FENCED, params).rowcount == 0:
                raise LeaseLost(f"the lease on task {self._key} was lost: entry not written")

    def entries(self) -> list[dict[str, Any]]:
        return read_run(self._pool, self._key, 0)


def read_run(pool: Pool, key: str, run: int) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        rows = conn.execute(_ENTRIES, {"key": key, "run": run}).fetchall()
    return [row[0] for row in rows if isinstance(row[0], dict)]


def archive_run(pool: Pool, key: TaskKey, run: int, fence: PgLease | None) -> None:
    params: dict[str, object] = {"key": str(key), "run": run}
    guard = "SELECT 1"
    if fence is not None:
        params["token"] = fence.token
        guard = f"SELECT 1 FROM tasks WHERE {LIVE} FOR SHARE"
    with pool.connection() as conn:
        row = conn.execute(_ARCHIVE.format(guard=guard).encode(), params).fetchone()
    if row is None or row[0] == 0:
        raise LeaseLost(f"the lease on task {key} was lost: run {run} not archived")


def drop_old_runs(
    pool: Pool, key: str, run: int, before: datetime, dry_run: bool
) -> tuple[int, int]:
    """Archived conversations and changesets of runs before `run` last written before `before`."""
    params = {"key": key, "below": run, "before": before}
    with pool.connection() as conn, conn.transaction():
        rows = conn.execute(_OLD_RUNS, params).fetchall()
        if not dry_run:
            for kind, old, _size in rows:
                table = "conversation" if kind == "conversation" else "changesets"
                conn.execute(
                    f"DELETE FROM {table} WHERE key = %s AND run = %s".encode(), (key, old)
                )
    return len(rows), sum(int(size or 0) for _kind, _run, size in rows)
