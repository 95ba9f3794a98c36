"""A sliding-window pacer for endpoints with their own per-minute limit.

GitLab.com allows 5 repository-archive requests a minute per user and answers the sixth with a
429 that carries no Retry-After; hitting it would close the whole GitLab host for a default wait.
Waiting for a free slot before asking costs less than being refused.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from bot.core.clock import SYSTEM_CLOCK
from bot.forge.errors import TransientError


class WindowPacer:
    """At most `limit` acquisitions in any `window` seconds (`limit` None or 0: unlimited)."""

    def __init__(
        self,
        limit: int | None,
        window: float = 60.0,
        *,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = SYSTEM_CLOCK.monotonic,
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


class ServerWindow:
    """Paces one rate-limit bucket by the server's own window: what its last answer said was
    left (`remaining`) and when its window resets, measured from that answer.

    A window counted on our clock drifts from the server's: the server starts it at a request
    it received earlier than we stamped it, and gives the reset in whole seconds, rounded up.
    A client that waited its own minute after 30 searches arrived a few milliseconds before
    the server's reset and was refused (issue 19). Here nothing is sent while the server says
    none are left and its reset (by its `Date`) has not come; requests in flight are counted
    down so that several callers cannot overrun the last answer.
    """

    MARGIN = 0.5  # seconds past the reset: the server's clock moves on between its answers

    def __init__(
        self,
        *,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = SYSTEM_CLOCK.monotonic,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        self._clock = clock
        self._wait = wait or (stop or threading.Event()).wait
        self._remaining: int | None = None  # None: no answer yet, or its window has ended
        self._resets_at = 0.0  # on our monotonic clock
        self._lock = threading.Lock()

    def acquire(self) -> float:
        """Wait (interruptibly) until the server's window has a request left; the seconds
        waited."""
        waited = 0.0
        while (delay := self._try_take()) > 0:
            if self._wait(delay):
                raise TransientError("shutting down while waiting for the search rate limit")
            waited += delay
        return waited

    def observe(self, remaining: int, seconds_to_reset: float) -> None:
        """An answer in this bucket: `remaining` requests left in a window that resets
        `seconds_to_reset` after the answer was made (the server's reset minus its Date)."""
        with self._lock:
            self._remaining = max(0, remaining)
            self._resets_at = self._clock() + seconds_to_reset + self.MARGIN

    def _try_take(self) -> float:
        with self._lock:
            now = self._clock()
            if self._remaining is not None and now >= self._resets_at:
                self._remaining = None  # a new window: the next answer tells its size
            if self._remaining is None:
                return 0.0
            if self._remaining > 0:
                self._remaining -= 1
                return 0.0
            return self._resets_at - now
