"""Tokens the forges rejected: said once per platform and cycle, kept for the health check and
for `bot run --once`'s exit status, cleared when that platform's next poll succeeds."""

from __future__ import annotations

import threading

from bot.core.log import get_logger
from bot.forge.errors import AuthError
from bot.service.health import HeartbeatWriter

log = get_logger(__name__)


class Rejections:
    def __init__(self, heartbeat: HeartbeatWriter) -> None:
        self._heartbeat = heartbeat
        self._guard = threading.Lock()
        self._said: set[str] = set()  # platforms already reported in this cycle
        self._current: dict[str, str] = {}  # platform -> error, until a poll succeeds again
        self.last: str | None = None  # the last rejection, for `bot run --once`

    def new_cycle(self, platform: str) -> None:
        """A poll of `platform` begins: a rejection is reported again."""
        with self._guard:
            self._said.discard(platform)

    def accepted(self, platform: str) -> None:
        """`platform`'s token works again; the heartbeat is written with the poll."""
        with self._guard:
            self._current.pop(platform, None)
            rejected = "; ".join(self._current.values()) or None
        self._heartbeat.auth_failed(rejected, write=False)

    def rejected(self, platform: str, exc: AuthError, task: str | None = None) -> None:
        with self._guard:
            first = platform not in self._said
            self._said.add(platform)
            self._current[platform] = f"{platform}: {exc}"
            self.last = str(exc)
            rejected = "; ".join(self._current.values())
        if first:
            extra = {"task": task} if task else {}
            log.error("forge_auth_failed", platform=platform, error=str(exc), **extra)
            self._heartbeat.auth_failed(rejected)
