"""What a forge's response headers say about its rate-limit buckets.

GitHub names the bucket of every answer in `x-ratelimit-resource` (core, search, graphql,
code_search, ...) beside `x-ratelimit-limit`/`-remaining`/`-reset` (reset in UTC epoch seconds:
docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api). GitLab's throttle names
itself in `RateLimit-Name` (throttle_authenticated_api, ...) beside `RateLimit-Remaining` and
`RateLimit-Reset` (lib/gitlab/rack_attack/request_throttle_data.rb, `common_response_headers`).
A reset is the server's time; our clock may be off by seconds, so it is measured against the
answer's own `Date` (RFC 9110: the time the server made the answer), never against ours.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any


def header(headers: Mapping[str, Any], name: str) -> str:
    """A header by name, whatever its case (PyGithub lower-cases, requests keeps it)."""
    lowered = name.lower()
    for key, value in headers.items():
        if str(key).lower() == lowered:
            return str(value)
    return ""


def until_reset(headers: Mapping[str, Any], reset: float, wall_clock: Callable[[], float]) -> float:
    """Seconds from when this answer was made until the server's `reset` (epoch seconds): by
    the answer's `Date` when it has one, else by our wall clock."""
    return max(0.0, reset - server_time(headers, wall_clock))


def server_time(headers: Mapping[str, Any], wall_clock: Callable[[], float]) -> float:
    """When the server made this answer (`Date`, whole seconds), or our clock without one."""
    date = header(headers, "Date")
    if date:
        try:
            return parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError):
            pass
    return wall_clock()


class Buckets:
    """Requests left in each bucket, as the last answer in it said (for the metrics)."""

    def __init__(self) -> None:
        self._remaining: dict[str, int] = {}
        self._lock = threading.Lock()

    def record(self, bucket: str, remaining: str) -> None:
        try:
            value = int(float(remaining))
        except ValueError:
            return
        with self._lock:
            self._remaining[bucket] = value

    def remaining(self) -> dict[str, int]:
        with self._lock:
            return dict(self._remaining)
