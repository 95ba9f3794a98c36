"""Work shared by several daemons: roles (`lead`), the job queue, webhook deliveries seen."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import psycopg

from bot.model.thread import TaskKey
from bot.store.base import QueuedJob
from bot.store.pg_pool import Pool

_LEAD = """
INSERT INTO leaders (role, holder, expires)
VALUES (%(role)s, %(me)s, now() + make_interval(secs => %(secs)s))
ON CONFLICT (role) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
    WHERE leaders.holder = excluded.holder OR leaders.expires < now()
RETURNING holder
"""
_ENQUEUE = """
INSERT INTO jobs (key, fresh) VALUES (%s, %s)
ON CONFLICT (key) DO UPDATE SET fresh = jobs.fresh OR excluded.fresh
"""
LEASED = "SELECT 1 FROM tasks t WHERE t.key = j.key AND t.lease_expires > now()"
# A job for a task a daemon holds is dropped: the holder works on it, and the next discovery
# plans it again if there is still something to do.
_DROP_HELD = f"DELETE FROM jobs j WHERE EXISTS ({LEASED})"
_TAKE = f"""
DELETE FROM jobs WHERE key IN (
    SELECT j.key FROM jobs j WHERE NOT EXISTS ({LEASED})
    ORDER BY j.queued_at, j.key LIMIT %(limit)s FOR UPDATE SKIP LOCKED
)
RETURNING key, fresh, queued_at
"""
# A running task whose lease expired without a release: its daemon died or froze mid-run (or
# while starting it, before its first save: no state yet, so it starts again). It is
# handed out at once rather than at the next discovery (which may be a poll interval away),
# unless it is backing off after forge errors (`retry_at`, compared here in Python: the json
# operators de-escape every string of the document, and a state holding "\u0000" from a tool's
# output would make the query fail for every daemon). Two daemons may both be handed the
# same orphan: the claim lets one of them have it (the other gets TaskBusy).
_ORPHANS = """
SELECT key, state, now() FROM tasks
WHERE (status = 'running' OR state IS NULL) AND lease_owner IS NOT NULL
  AND lease_expires <= now()
ORDER BY lease_expires, key
"""
MAX_DELIVERIES = 10_000
_TRIM_DELIVERIES = f"""
DELETE FROM deliveries WHERE seen_at < now() - interval '30 days' OR id IN (
    SELECT id FROM deliveries ORDER BY seen_at DESC, id OFFSET {MAX_DELIVERIES}
)
"""


def lead(pool: Pool, role: str, me: str, seconds: float) -> bool:
    with pool.connection() as conn:
        row = conn.execute(_LEAD, {"role": role, "me": me, "secs": seconds}).fetchone()
    return row is not None


def enqueue(pool: Pool, jobs: Iterable[QueuedJob]) -> None:
    rows = sorted({str(job.key): job.fresh for job in jobs}.items())  # sorted: no deadlocks
    if not rows:
        return
    with pool.connection() as conn, conn.transaction(), conn.cursor() as cursor:
        cursor.executemany(_ENQUEUE, rows)


def take(pool: Pool, limit: int) -> list[QueuedJob]:
    """Queued jobs first, then tasks whose daemon died holding them (orphans)."""
    if limit <= 0:
        return []
    with pool.connection() as conn, conn.transaction():
        conn.execute(_DROP_HELD)
        rows = conn.execute(_TAKE, {"limit": limit}).fetchall()
        rows.sort(key=lambda row: (row[2], row[0]))  # RETURNING has no order: oldest first
        jobs = [QueuedJob(TaskKey.parse(key), bool(fresh)) for key, fresh, _at in rows]
        if len(jobs) < limit:
            orphans = conn.execute(_ORPHANS).fetchall()
            due = [key for key, state, now in orphans if _due(state, now)]
            jobs += [QueuedJob(TaskKey.parse(key), False) for key in due[: limit - len(jobs)]]
    return jobs


def _due(state: object, now: datetime) -> bool:
    """Not backing off: no `retry_at`, or one that has passed (by the database's clock)."""
    retry_at = state.get("retry_at") if isinstance(state, dict) else None
    if not isinstance(retry_at, str):
        return True
    try:
        when = datetime.fromisoformat(retry_at)
    except ValueError:
        return True  # unreadable: better handed out than stuck
    return (when if when.tzinfo else when.replace(tzinfo=UTC)) <= now


class PgDeliveries:
    """Delivery ids recorded in one statement: across daemons, each id is taken once."""

    TRIM_EVERY = 100

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._adds = itertools.count(1)

    def add_all(self, *keys: str) -> bool:
        """Record every key; False (and nothing recorded) when any was seen before."""
        wanted = sorted(set(keys))
        if not wanted:
            return True
        with self._pool.connection() as conn:
            with conn.transaction() as tx:
                inserted = conn.execute(
                    "INSERT INTO deliveries (id) SELECT unnest(%s::text[]) ON CONFLICT DO NOTHING",
                    (wanted,),
                ).rowcount
                if inserted != len(wanted):
                    tx.force_rollback = True  # one was there: record none of them
                    return False
            if next(self._adds) % self.TRIM_EVERY == 0:
                self.trim(conn)
        return True

    def trim(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(_TRIM_DELIVERIES)
