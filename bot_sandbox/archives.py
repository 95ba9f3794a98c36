"""Repository archives as both forges serve them: the tarball answer, and GitHub's short-lived
archive links (see forge_server's docstring for where each forge sends a download)."""

from __future__ import annotations

import secrets
import threading
import time

from bot_sandbox.http import Response
from bot_sandbox.world import SCommit, SRepo, tarball


class ArchiveLinks:
    """The short-lived `?token=` GitHub puts in archive redirects: valid five minutes."""

    LIFETIME = 300.0

    def __init__(self) -> None:
        self._issued: dict[str, float] = {}
        self._lock = threading.Lock()

    def issue(self) -> str:
        token = secrets.token_hex(10)
        with self._lock:
            self._issued[token] = time.monotonic() + self.LIFETIME
        return token

    def valid(self, token: str) -> bool:
        with self._lock:
            return self._issued.get(token, 0.0) > time.monotonic()


def archive_response(repo: SRepo, commit: SCommit, prefix: str) -> Response:
    """A .tar.gz of `commit` under `prefix/` (or the crafted archive a hostile test set)."""
    data = (
        repo.archive_override
        if repo.archive_override is not None
        else tarball(prefix, commit.files, commit.modes)
    )
    return Response(raw=data, headers={"Content-Type": "application/x-gzip"})
