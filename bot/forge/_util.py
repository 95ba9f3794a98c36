"""Small helpers shared by the adapters: timestamps, bounded caches, Link headers."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from bot.core.clock import SYSTEM_CLOCK

K = TypeVar("K")
V = TypeVar("V")

_LINK = re.compile(r'<([^>]+)>\s*;\s*rel="([^"]+)"')


def next_link(header: str | None) -> str | None:
    if not header:
        return None
    for url, rel in _LINK.findall(header):
        if rel == "next":
            return str(url)
    return None


class LRU(Generic[K, V]):
    """A thread-safe bounded mapping: long-running daemons must not grow without limit."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._capacity:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


class TTLCache(Generic[K, V]):
    """LRU whose entries expire; used for permissions, which change rarely but do change."""

    def __init__(
        self, ttl: float, capacity: int = 4096, clock: Callable[[], float] = SYSTEM_CLOCK.monotonic
    ) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lru: LRU[K, tuple[float, V]] = LRU(capacity)

    def get(self, key: K) -> V | None:
        entry = self._lru.get(key)
        if entry is None or entry[0] < self._clock():
            return None
        return entry[1]

    def put(self, key: K, value: V) -> None:
        self._lru.put(key, (self._clock() + self._ttl, value))


def clean_text(text: str | None) -> str:
    """Text from a forge, safe to store and log: lone surrogates (broken Unicode escapes in
    JSON) replaced, NUL bytes removed."""
    if not text:
        return ""
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")


def folders(paths: Iterable[str]) -> list[str]:
    """Every folder on the way to `paths`, parents before children ("" is the root)."""
    found = {"/".join(p.split("/")[:n]) for p in paths for n in range(p.count("/") + 1)}
    return sorted(found, key=lambda f: (f.count("/") if f else -1, f))
