"""Time: the one `Clock` every part reads, and forge timestamps (whole seconds, UTC).

Nothing in `bot/` reads the time but through a `Clock` (tests/core/test_clock_rule.py fails on
a direct `datetime.now`, `time.time`, `time.monotonic`, ...). Parts take the clock as a
constructor argument whose production default is `SYSTEM_CLOCK`; a part that needs only one
reading takes that reading (`clock.monotonic`, `clock.time`) as a `Callable[[], float]`. Tests
move a `FakeClock` instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall time, timezone-aware UTC: for timestamps and for comparing with the forges'."""
        ...

    def time(self) -> float:
        """Wall time in epoch seconds (`time.time`): for file times and HTTP dates."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: for durations and deadlines only."""
        ...


class SystemClock:
    """The host's clocks."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK: Clock = SystemClock()


class FakeClock:
    """A clock a test moves: `advance` moves it on, and every reading moves it on by `step`
    seconds after it is read (0: events in the same instant, so many in one second; 1: each
    in its own second).

    Wall and monotonic time are the same seconds here, moved together. It starts at `start`
    (default: the host's time now, in whole seconds, so that it lines up with parts still on
    the host's clock, such as the emulator).
    """

    def __init__(self, start: datetime | None = None, step: float = 0.0) -> None:
        _forward(step)
        first = start if start is not None else datetime.now(UTC).replace(microsecond=0)
        if first.tzinfo is None:
            raise ValueError("a FakeClock starts at a timezone-aware time")
        self._seconds = first.timestamp()
        self._step = step
        self._lock = threading.Lock()

    def advance(self, seconds: float) -> None:
        _forward(seconds)
        with self._lock:
            self._seconds += seconds

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._read(), UTC)

    def time(self) -> float:
        return self._read()

    def monotonic(self) -> float:
        return self._read()

    def _read(self) -> float:
        with self._lock:
            seconds = self._seconds
            self._seconds += self._step
            return seconds


def _forward(seconds: float) -> None:
    if seconds < 0:
        raise ValueError(f"a clock does not go back ({seconds} seconds)")


def parse_time(value: str | None) -> datetime:
    """Parse the ISO-8601 timestamps both forges return; always timezone-aware UTC."""
    if not value:
        return datetime.fromtimestamp(0, UTC)
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
