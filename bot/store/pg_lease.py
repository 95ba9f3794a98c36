"""Task leases in the database: claimed, renewed and released by conditional statements.

Every decision uses the database's clock (`now()`), never ours: the daemons' clocks may differ.
A claim takes the next fencing token; a renewal or a fenced write succeeds only while the row
still carries that token, unexpired.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from bot.core.log import get_logger
from bot.model.thread import TaskKey
from bot.store.errors import LeaseLost, TaskBusy
from bot.store.pg_pool import DatabaseError, Pool

log = get_logger(__name__)

_CLAIM = """
INSERT INTO tasks (key, lease_owner, lease_token, lease_expires)
VALUES (%(key)s, %(owner)s, nextval('lease_tokens'), now() + make_interval(secs => %(secs)s))
ON CONFLICT (key) DO UPDATE
    SET lease_owner = excluded.lease_owner,
        lease_token = excluded.lease_token,
        lease_expires = excluded.lease_expires
    WHERE tasks.lease_expires IS NULL OR tasks.lease_expires <= now()
RETURNING lease_token
"""
_RENEW = """
UPDATE tasks SET lease_expires = now() + make_interval(secs => %(secs)s)
WHERE key = %(key)s AND lease_token = %(token)s AND lease_expires > now()
"""
_RELEASE = """
UPDATE tasks SET lease_owner = NULL, lease_expires = NULL
WHERE key = %(key)s AND lease_token = %(token)s
"""
_FORGET = """
DELETE FROM tasks WHERE key = %(key)s AND lease_token = %(token)s AND state IS NULL
"""
# The condition a fenced write carries (a row lock: a claim waits until the write commits).
LIVE = "key = %(key)s AND lease_token = %(token)s AND lease_expires > now()"


class PgLease:
    def __init__(self, pool: Pool, key: TaskKey, token: int, seconds: float) -> None:
        self._pool = pool
        self.key = key
        self._token = token
        self._seconds = seconds
        self.lost = False  # set once a renewal found the lease gone: renewals stop

    @property
    def token(self) -> int:
        return self._token

    def check(self) -> None:
        """Renew the lease; LeaseLost when it expired or another daemon claimed the task."""
        if self.lost:
            raise LeaseLost(f"the lease on task {self.key} was lost")
        with self._pool.connection() as conn:
            renewed = conn.execute(_RENEW, self._params()).rowcount
        if renewed == 0:
            self.lost = True
            raise LeaseLost(f"the lease on task {self.key} was lost")

    def release(self) -> None:
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(_RELEASE, self._params())
            conn.execute(_FORGET, self._params())  # claimed, never saved (or removed)

    def _params(self) -> dict[str, object]:
        return {"key": str(self.key), "token": self._token, "secs": self._seconds}


def claim(pool: Pool, key: TaskKey, owner: str, seconds: float) -> PgLease:
    with pool.connection() as conn:
        row = conn.execute(_CLAIM, {"key": str(key), "owner": owner, "secs": seconds}).fetchone()
    if row is None:
        raise TaskBusy(f"task {key} is being worked on by another daemon")
    return PgLease(pool, key, int(row[0]), seconds)


@contextlib.contextmanager
def held(pool: Pool, key: TaskKey, owner: str, seconds: float) -> Iterator[PgLease]:
    """Claim `key`, keep the lease alive while the block runs, release it at the end."""
    lease = claim(pool, key, owner, seconds)
    stop = threading.Event()
    renewer = threading.Thread(
        target=_renew, args=(lease, stop, seconds / 3), name=f"lease {key}", daemon=True
    )
    renewer.start()
    try:
        yield lease
    finally:
        stop.set()
        renewer.join()
        try:
            lease.release()
        except DatabaseError as exc:  # it expires by itself: another daemon waits a little
            log.warning("lease_release_failed", task=str(key), error=str(exc))


def _renew(lease: PgLease, stop: threading.Event, every: float) -> None:
    while not stop.wait(every):
        try:
            lease.check()
        except LeaseLost:
            # Not logged here: the worker's next fenced write or check() is refused and the
            # worker logs `lease_lost`, once per task (both logging it made two lines).
            return
        except DatabaseError as exc:  # the database away for a moment: try again next time
            log.warning("lease_renewal_failed", task=str(lease.key), error=str(exc))
