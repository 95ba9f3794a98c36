"""GitHub's search bucket, counted apart from the core one."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable


class SearchLimit:
    """GitHub's search bucket: 30 requests a minute (docs.github.com/rest/search/search, "Rate
    limit"), counted apart from the core bucket (`x-ratelimit-resource: search`). A window
    opens at the first search after the last one ended and resets at the next whole second a
    minute later (`x-ratelimit-reset` is whole epoch seconds: the reset the header states is
    the one a client can keep); the 31st search inside it is answered 403."""

    PER_MINUTE = 30

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._windows: dict[str, tuple[int, int]] = {}  # login -> (reset, used)
        self._lock = threading.Lock()

    def take(self, login: str) -> tuple[bool, dict[str, str]]:
        """Count one search by `login`: whether it may be answered, and the bucket's headers."""
        with self._lock:
            now = self._clock()
            reset, used = self._windows.get(login, (0, 0))
            if now >= reset:
                reset, used = math.ceil(now + 60), 0
            allowed = used < self.PER_MINUTE
            used += 1 if allowed else 0
            self._windows[login] = (reset, used)
        return allowed, {
            "x-ratelimit-limit": str(self.PER_MINUTE),
            "x-ratelimit-remaining": str(self.PER_MINUTE - used),
            "x-ratelimit-reset": str(reset),
            "x-ratelimit-used": str(used),
            "x-ratelimit-resource": "search",
        }
