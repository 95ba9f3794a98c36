"""The PostgreSQL backend of `Store`: several daemons on one database.

Each task is worked by one daemon at a time under a lease (`pg_lease`); the writes of a worker
go through `fenced(lease)`, whose statements carry the lease's token and refuse to write once
the lease has moved on. The schema is checked at `open` against the migrations shipped with
this version (`schema`); `bot db migrate` applies them.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.model.state import TaskState, now_iso
from bot.model.thread import TaskKey
from bot.store import pg_conversation, pg_cursors, pg_queue, pg_tasks, schema
from bot.store.base import DeliveryMemory, Holder, Lease, QueuedJob, Store, StoreIndex
from bot.store.errors import LeaseLost, StateError, Unreadable
from bot.store.pg_conversation import PgConversation
from bot.store.pg_lease import LIVE, PgLease, held
from bot.store.pg_pool import DatabaseError, Pool
from bot.store.transfer import TaskRecord

_HELD = f"SELECT 1 FROM tasks WHERE {LIVE} FOR UPDATE"
_SIZE = """
SELECT coalesce((SELECT octet_length(state::text) FROM tasks WHERE key = %(key)s), 0)
     + coalesce((SELECT sum(octet_length(entry::text)) FROM conversation WHERE key = %(key)s), 0)
     + coalesce((SELECT sum(octet_length(changes::text)) FROM changesets WHERE key = %(key)s), 0)
"""


class PostgresStore:
    def __init__(
        self,
        dsn: str,
        *,
        lease_seconds: float,
        pool_size: int,
        connect_seconds: float = 15,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._connect_seconds = connect_seconds  # how long `open` waits for the database
        self._where, self._password = _describe(dsn)
        self._lease_seconds = lease_seconds
        # Stamps `updated_at` (leases and the queue's times are the database's own, pg_lease).
        self._clock = clock
        self._pool = Pool(
            dsn, where=self._where, password=self._password, size=pool_size, clock=clock
        )
        self._pool.connect_seconds = connect_seconds
        self._daemon = ""
        self._fence: PgLease | None = None  # set on the views `fenced` returns
        self._deliveries: pg_queue.PgDeliveries | None = None

    @property
    def shared(self) -> bool:
        return True

    @property
    def where(self) -> str:
        return self._where

    # -- the daemon ---------------------------------------------------------------------------

    def open(self, daemon: str) -> None:
        try:
            self._pool.open(wait=True, timeout=self._connect_seconds)
            with self._pool.connection() as conn:
                schema.check(conn, self._where)
        except psycopg.Error as exc:  # the pool did not get its first connection in time
            self._pool.close()
            raise DatabaseError(f"cannot use database {self._where}: {self.scrub(exc)}") from None
        except StateError:
            self._pool.close()
            raise
        self._pool.outage.armed = True  # from now on an outage is logged (at start: by the CLI)
        self._daemon = daemon

    def close(self) -> None:
        self._pool.close()  # the fenced views share the pool: closed with it

    def scrub(self, error: BaseException | str) -> str:
        return self._pool.scrub(error)

    # -- tasks --------------------------------------------------------------------------------

    def load(self, key: TaskKey) -> TaskState | None:
        return pg_tasks.read_state(self._pool, str(key))

    def save(self, state: TaskState) -> None:
        state.updated_at = now_iso(clock=self._clock)
        with self._pool.connection() as conn, conn.transaction():
            pg_tasks.write_state(conn, state, self._fence)

    def archived_changes(self, state: TaskState) -> dict[str, str | None]:
        return pg_tasks.archived_changes(self._pool, state)

    def conversation(self, key: TaskKey) -> PgConversation:
        return PgConversation(self._pool, key, self._fence)

    def archived_conversation(self, key: TaskKey, run: int) -> list[dict[str, Any]]:
        return pg_conversation.read_run(self._pool, str(key), run) if run > 0 else []

    def archive_run(self, key: TaskKey, run: int) -> None:
        pg_conversation.archive_run(self._pool, key, run, self._fence)

    def scan(self) -> tuple[list[TaskState], list[Unreadable]]:
        return pg_tasks.scan(self._pool)

    def all_states(self) -> list[TaskState]:
        return self.scan()[0]

    def index(self) -> StoreIndex:
        return pg_tasks.PgIndex(self._pool)

    @contextlib.contextmanager
    def task_lock(self, key: TaskKey) -> Iterator[Lease]:
        with held(self._pool, key, self._daemon, self._lease_seconds) as lease:
            yield lease

    def fenced(self, lease: Lease) -> Store:
        if not isinstance(lease, PgLease):
            raise TypeError(f"not a lease of this store: {type(lease).__name__}")
        view = copy.copy(self)
        view._fence = lease
        return view

    def remove(self, key: TaskKey, dry_run: bool = False) -> int:
        params: dict[str, object] = {"key": str(key)}
        with self._pool.connection() as conn, conn.transaction():
            if self._fence is not None:
                # Under the lease, locked until the deletes commit: a caller frozen past its
                # lease (`bot prune`) must not delete the run of the daemon that took the task.
                params["token"] = self._fence.token
                if conn.execute(_HELD, params).fetchone() is None:
                    raise LeaseLost(f"the lease on task {key} was lost: not removed")
            row = conn.execute(_SIZE, params).fetchone()
            if not dry_run:
                conn.execute("DELETE FROM conversation WHERE key = %(key)s", params)
                conn.execute("DELETE FROM changesets WHERE key = %(key)s", params)
                conn.execute("DELETE FROM jobs WHERE key = %(key)s", params)
                # The row stays while leased (its release deletes it): the lease goes on.
                conn.execute(
                    "UPDATE tasks SET state = NULL, status = NULL WHERE key = %(key)s", params
                )
                conn.execute(
                    "DELETE FROM tasks WHERE key = %(key)s"
                    " AND (lease_expires IS NULL OR lease_expires <= now())",
                    params,
                )
        return int(row[0]) if row else 0

    def drop_old_runs(
        self, state: TaskState, before: datetime, dry_run: bool = False
    ) -> tuple[int, int]:
        return pg_conversation.drop_old_runs(self._pool, state.key, state.run, before, dry_run)

    def holders(self) -> dict[str, Holder]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT key, lease_owner, lease_expires FROM tasks WHERE lease_expires > now()"
            ).fetchall()
        return {key: Holder(owner or "", expires) for key, owner, expires in rows}

    def deliveries(self) -> DeliveryMemory:
        if self._deliveries is None:
            self._deliveries = pg_queue.PgDeliveries(self._pool)
        return self._deliveries

    # -- discovery ----------------------------------------------------------------------------

    def discovery_cursor(self, name: str) -> str | None:
        return pg_cursors.read(self._pool, name)

    def save_discovery_cursor(self, name: str, value: str) -> None:
        pg_cursors.save(self._pool, name, value)

    # -- shared work --------------------------------------------------------------------------

    def lead(self, role: str, seconds: float) -> bool:
        return pg_queue.lead(self._pool, role, self._daemon, seconds)

    def enqueue(self, jobs: Iterable[QueuedJob]) -> None:
        pg_queue.enqueue(self._pool, jobs)

    def take(self, limit: int) -> list[QueuedJob]:
        return pg_queue.take(self._pool, limit)

    # -- copying (bot db import / export) -----------------------------------------------------

    def export_task(self, key: TaskKey) -> TaskRecord | None:
        return pg_tasks.export_task(self._pool, str(key))

    def import_task(self, record: TaskRecord) -> None:
        pg_tasks.import_task(self._pool, record)


def _describe(dsn: str) -> tuple[str, str]:
    """The DSN without its password (for messages), and the password (to scrub errors).

    A DSN that does not parse is refused here, before any connection is tried: libpq quotes the
    piece it cannot read (maybe the password) and the pool logs that at every attempt."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        raise StateError(
            "store.dsn does not parse (not shown: it may hold the password): write it as"
            " postgresql://user:password@host/dbname with special characters of the password"
            " percent-encoded, or as key=value pairs with values in single quotes"
        ) from None
    password = str(parts.pop("password", "") or "")
    shown = {name: value for name, value in parts.items() if "password" not in name}
    return make_conninfo("", **shown), password
