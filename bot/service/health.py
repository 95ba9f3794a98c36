"""Heartbeat file and `bot healthcheck`: is the daemon alive and polling successfully?"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from bot.core.atomic import atomic_write
from bot.core.clock import SYSTEM_CLOCK
from bot.core.log import get_logger

log = get_logger(__name__)
HEARTBEAT = "heartbeat"


@dataclass
class Heartbeat:
    at: float  # wall clock of the last write
    last_poll: float | None = None
    last_poll_ok: bool = True
    failing_since: float | None = None  # first failed poll of the current failure streak
    last_error: str | None = None
    running_tasks: int = 0
    auth_error: str | None = None  # a forge rejected the token (401); the daemon clears it


class HeartbeatWriter:
    def __init__(self, state_dir: Path, clock: Callable[[], float] = SYSTEM_CLOCK.time) -> None:
        self.path = state_dir / HEARTBEAT
        self.clock = clock
        self.beat = Heartbeat(at=clock())

    def poll(self, ok: bool, error: str | None = None, running: int = 0) -> None:
        now = self.clock()
        self.beat.last_poll = now
        self.beat.last_poll_ok = ok
        self.beat.running_tasks = running
        if ok:
            self.beat.failing_since, self.beat.last_error = None, None
        else:
            self.beat.failing_since = self.beat.failing_since or now
            self.beat.last_error = error
        self.write()

    def auth_failed(self, error: str | None, write: bool = True) -> None:
        """A token was rejected (unhealthy at once, whatever the poll history says), or, with
        None, every source accepts its token again."""
        self.beat.auth_error = error
        if write:
            self.write()

    def write(self) -> None:
        self.beat.at = self.clock()
        try:
            atomic_write(self.path, json.dumps(asdict(self.beat)).encode())
        except OSError as exc:
            # A full or read-only disk must not stop the daemon; the stale heartbeat is
            # exactly what `bot healthcheck` will then report.
            log.error("heartbeat_write_failed", error=f"{type(exc).__name__}: {exc.strerror}")


def check(state_dir: Path, poll_interval: float, max_missed: int, now: float) -> tuple[bool, str]:
    """(healthy, one-line reason)."""
    path = state_dir / HEARTBEAT
    try:
        beat = Heartbeat(**json.loads(path.read_text()))
    except FileNotFoundError:
        return False, f"no heartbeat at {path}: the daemon has not started"
    except (OSError, ValueError, TypeError) as exc:
        return False, f"unreadable heartbeat {path}: {exc}"
    limit = poll_interval * max_missed
    age = now - beat.at
    if beat.auth_error is not None and age <= limit:
        return False, f"the forge rejected the token: {beat.auth_error}"
    if age > limit:
        return (
            False,
            f"heartbeat is {age:.0f}s old (limit {limit:.0f}s): the daemon is stuck or down",
        )
    if beat.failing_since is not None and now - beat.failing_since > limit:
        failing = now - beat.failing_since
        return False, f"polls have failed for {failing:.0f}s: {beat.last_error or 'unknown error'}"
    return True, f"ok: heartbeat {age:.0f}s ago, {beat.running_tasks} tasks running"
