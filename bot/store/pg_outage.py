"""Whether the database answers, as this daemon sees it: one `database_unavailable` when an
outage starts and one `database_back` when it ends, however many attempts fail in between.

Fed from the two places every database failure passes through: each connection attempt
(`watched`: the pool's own reconnections in the background too, which go on while callers
wait for a connection and see no error at all) and each use of a pooled connection
(`pg_pool.Pool.connection`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Self

import psycopg
from psycopg.rows import TupleRow
from psycopg_pool import PoolClosed

from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.log import get_logger

log = get_logger(__name__)


class Outage:
    def __init__(
        self, where: str, scrub: Callable[[BaseException], str], clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self._where = where
        self._scrub = scrub
        self._clock = clock
        self._lock = threading.Lock()
        self._down_since: float | None = None  # monotonic; None while the database answers
        self._failures = 0
        # Set once a daemon (or `bot db`) has opened the store: a reading command (`bot
        # status`) reports a failure itself, on stderr.
        self.armed = False

    @staticmethod
    def counts(error: BaseException) -> bool:
        """An error that says the database is away (not a refused statement, not our close)."""
        return isinstance(error, psycopg.OperationalError) and not isinstance(error, PoolClosed)

    def failed(self, error: BaseException) -> None:
        with self._lock:
            first = self._down_since is None
            if first:
                self._down_since, self._failures = self._clock.monotonic(), 0
            self._failures += 1
        if first and self.armed:
            log.error("database_unavailable", database=self._where, error=self._scrub(error))

    def worked(self) -> None:
        with self._lock:
            since, failures = self._down_since, self._failures
            self._down_since = None
        if since is not None and self.armed:
            log.info(
                "database_back",
                database=self._where,
                down_seconds=round(self._clock.monotonic() - since, 1),
                failures=failures,
            )


def watched(outage: Outage) -> type[psycopg.Connection[TupleRow]]:
    """A connection class whose every connection attempt reports to `outage`."""

    class Watched(psycopg.Connection[TupleRow]):
        @classmethod
        def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
            try:
                conn = super().connect(conninfo, **kwargs)
            except psycopg.OperationalError as exc:
                outage.failed(exc)
                raise
            outage.worked()
            return conn

    return Watched
