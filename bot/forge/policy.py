"""The one retry loop for forge requests: rate-limit gate, capped backoff, stoppable waits.

Every adapter call goes through `RequestPolicy.call`, naming the rate-limit bucket it spends
(GitHub: `core`, `search`, ... as `x-ratelimit-resource` names them: docs.github.com/rest/
using-the-rest-api/rate-limits-for-the-rest-api; GitLab: an endpoint's own limit or the
API's). A rate limit closes the
gate of the bucket the forge named (or of the refused request's bucket when it named none):
no request in that bucket goes to the host until the wait told by the server has passed, while
the others go on (a search limit does not hold a comment check). A limit that holds the whole
client (GitHub's secondary limits, GitLab's API throttle) closes every bucket. Short waits are
slept here (interruptibly); long ones are raised as `RateLimited` so the scheduler decides when
to come back, instead of a worker sleeping for an hour inside a library call.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from bot.core.clock import SYSTEM_CLOCK
from bot.core.log import get_logger
from bot.forge.errors import ALL_BUCKETS, ForgeError, RateLimited, TransientError

T = TypeVar("T")
log = get_logger(__name__)
# The bucket of a call that names none: GitHub's and GitLab's general API limit.
DEFAULT_BUCKET = "core"


@dataclass
class HostGate:
    """Closed until `open_at` (monotonic seconds) after a rate limit."""

    host: str
    clock: Callable[[], float] = SYSTEM_CLOCK.monotonic
    _open_at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def close_for(self, seconds: float) -> bool:
        """Close the gate; True if this call extended the wait (so it is logged once)."""
        with self._lock:
            until = self.clock() + seconds
            if until <= self._open_at:
                return False
            self._open_at = until
            return True

    def remaining(self) -> float:
        with self._lock:
            return max(0.0, self._open_at - self.clock())


@dataclass
class RequestPolicy:
    host: str
    max_attempts: int = 4
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    # Waits up to this long happen inside the call; longer ones are raised to the scheduler.
    max_inline_wait: float = 90.0
    stop: threading.Event = field(default_factory=threading.Event)
    clock: Callable[[], float] = SYSTEM_CLOCK.monotonic
    # Called with the outcome of every attempt ("ok", "rate_limited", "transient", ...).
    observe: Callable[[str], None] = field(default=lambda _outcome: None)
    _gates: dict[str, HostGate] = field(init=False, default_factory=dict)
    _gates_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def gate(self, bucket: str = ALL_BUCKETS) -> HostGate:
        """The gate of one bucket (`ALL_BUCKETS`: the one every request waits for)."""
        with self._gates_lock:
            found = self._gates.get(bucket)
            if found is None:
                found = self._gates[bucket] = HostGate(self.host, self.clock)
            return found

    def call(
        self,
        operation: str,
        fn: Callable[[], T],
        translate: Callable[[Exception], ForgeError],
        *,
        idempotent: bool = True,
        bucket: str = DEFAULT_BUCKET,
    ) -> T:
        """Run `fn`, translating errors; retry what is safe to retry. `bucket`: the rate-limit
        bucket the request spends."""
        attempt = 0
        while True:
            self._wait_for_gate(operation, bucket)
            try:
                result = fn()
            except Exception as exc:
                error = translate(exc)
                self.observe(_outcome(error))
                error.operation = error.operation or operation
                if error is exc:
                    raise
                failure = error
                cause = exc
            else:
                self.observe("ok")
                return result
            attempt += 1
            if isinstance(failure, RateLimited):
                closed = failure.bucket or bucket
                if self.gate(closed).close_for(failure.retry_after):
                    log.warning(
                        "forge_rate_limited",
                        host=self.host,
                        operation=operation,
                        bucket=closed,
                        retry_after=round(failure.retry_after, 1),
                        status=failure.status,
                    )
                if failure.retry_after <= self.max_inline_wait and attempt < self.max_attempts * 2:
                    continue
                raise failure from cause
            if isinstance(failure, TransientError) and idempotent and attempt < self.max_attempts:
                delay = self._backoff(attempt)
                log.info(
                    "forge_retry",
                    host=self.host,
                    operation=operation,
                    attempt=attempt,
                    delay=round(delay, 2),
                    error=str(failure),
                )
                self._sleep(delay)
                continue
            raise failure from cause

    def _wait_for_gate(self, operation: str, bucket: str) -> None:
        while (remaining := self._closed_for(bucket)) > 0:
            if remaining > self.max_inline_wait:
                raise RateLimited(
                    f"{self.host} is rate limited ({operation})", remaining, bucket=bucket
                )
            self._sleep(remaining)

    def _closed_for(self, bucket: str) -> float:
        return max(self.gate(bucket).remaining(), self.gate(ALL_BUCKETS).remaining())

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1))
        return float(ceiling / 2 + random.uniform(0, ceiling / 2))

    def _sleep(self, seconds: float) -> None:
        if self.stop.wait(seconds):
            raise TransientError(f"{self.host}: shutting down")


def _outcome(error: Exception) -> str:
    if isinstance(error, RateLimited):
        return "rate_limited"
    if isinstance(error, TransientError):
        return "transient"
    status = getattr(error, "status", None)
    return str(status) if status else "error"
