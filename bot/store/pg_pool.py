"""The connection pool of the postgres backend, with the database's errors translated.

Callers of the store know `StateError` (and its `TaskBusy`, `LeaseLost`), not psycopg: a
statement that fails because the database is away or refuses it raises `DatabaseError`, its
text without the password. Every failure also goes to `outage` (`pg_outage`), which logs the
start and the end of an outage once each.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.store import schema
from bot.store.errors import DatabaseError
from bot.store.pg_outage import Outage, watched

__all__ = ["DatabaseError", "Pool"]


class Pool(ConnectionPool):
    def __init__(
        self, dsn: str, *, where: str, password: str, size: int, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.where = where
        self._password = password
        # Logs an outage's start and end, once each (its length on `clock`).
        self.outage = Outage(where, self.scrub, clock)
        super().__init__(
            dsn,
            min_size=1,
            max_size=size,
            open=False,
            kwargs={"autocommit": True},
            # A connection the server dropped (restart, failover, idle timeout) is replaced
            # when it is taken, not reported as an error to the write that would use it.
            check=ConnectionPool.check_connection,
            connection_class=watched(self.outage),
        )
        self._used = False  # opened once: never again after `close` (the daemon is ending)
        self.connect_seconds = 15.0

    def scrub(self, error: BaseException | str) -> str:
        """An error's text without the password (libpq messages should not hold it anyway)."""
        text = str(error).strip()
        return text.replace(self._password, "***") if self._password else text

    @contextlib.contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[psycopg.Connection[Any]]:
        try:
            if self.closed and not self._used:
                # A command that reads the store (`bot status`, `bot prune`) opens no daemon:
                # the schema is checked here instead, so that an unmigrated database is named
                # as such (StateError naming `bot db migrate`), not as a missing table.
                self.open(wait=True, timeout=self.connect_seconds)
                self._used = True
                with super().connection() as conn:
                    schema.check(conn, self.where)
            self._used = True
            with super().connection(timeout) as conn:
                yield conn
            self.outage.worked()
        except psycopg.Error as exc:
            if Outage.counts(exc):  # a pool timeout, a connection lost mid-statement
                self.outage.failed(exc)
            raise DatabaseError(f"database {self.where}: {self.scrub(exc)}") from None
