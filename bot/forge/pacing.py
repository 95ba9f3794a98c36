"""A sliding-window pacer for endpoints with their own per-minute limit.

GitLab.com allows 5 repository-archive requests a minute per user and answers the sixth with a
429 that carries no Retry-After; hitting it would close the whole GitLab host for a default wait.
Waiting for a free slot before asking costs less than being refused.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from bot.forge.errors import TransientError


class WindowPacer:
    """At most `limit` acquisitions in any `window` seconds (`limit` None or 0: unlimited)."""

    def __init__(
        self,
        limit: int | None,
        window: float = 60.0,
        *,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        self._limit = limit or 0
        self._window = window
        self._clock = clock
        # Returns True when the wait was cut short because the daemon is stopping.
        self._wait = wait or (stop or threading.Event()).wait
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Take a slot, waiting for one (interruptibly); returns the seconds waited."""
        return self._take()[0]

    def _take(self) -> tuple[float, float | None]:
        waited = 0.0
        while True:
            delay, stamp = self._try_take()
            if delay <= 0:
                return waited, stamp
            if self._wait(delay):
                raise TransientError("shutting down while waiting for an archive download slot")
            waited += delay

    @contextmanager
    def slot(self) -> Iterator[float]:
        """A slot held for one request, stamped when the request ends.

        The forge counts a request when it arrives, which is after we take the slot: stamping
        the end keeps our window behind the forge's, whatever the latency.
        """
        waited, stamp = self._take()
        try:
            yield waited
        finally:
            if stamp is not None:
                self._restamp(stamp)

    def _restamp(self, stamp: float) -> None:
        with self._lock:
            if stamp in self._times:
                self._times.remove(stamp)
            self._times.append(self._clock())

    def _try_take(self) -> tuple[float, float | None]:
        """(0, stamp) when a slot was taken, else (seconds until one frees, None)."""
        if self._limit <= 0:
            return 0.0, None
        with self._lock:
            now = self._clock()
            while self._times and now - self._times[0] >= self._window:
                self._times.popleft()
            if len(self._times) < self._limit:
                self._times.append(now)
                return 0.0, now
            return self._window - (now - self._times[0]), None
