"""Delivery ids already acted on, so a replayed delivery is refused, across restarts too.

Bounded: the newest `capacity` ids are kept (in memory and in an append-only file compacted at
start). A replay older than that is possible but harmless: a delivery only asks for one thread
check, which polling would do anyway.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path


class SeenDeliveries:
    def __init__(self, path: Path | None = None, capacity: int = 10_000) -> None:
        self._path = path
        self._capacity = capacity
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        if path is not None:
            self._load(path)

    def add(self, delivery: str) -> bool:
        """Record `delivery`; False when it was seen before (a replay)."""
        return self.add_all(delivery)

    def add_all(self, *keys: str) -> bool:
        """Record every key; False (and nothing recorded) when any was seen before."""
        with self._lock:
            if any(key in self._ids for key in keys):
                return False
            for key in keys:
                self._ids[key] = None
            while len(self._ids) > self._capacity:
                self._ids.popitem(last=False)
            if self._path is not None:
                with open(self._path, "a", encoding="utf-8") as handle:
                    handle.write("".join(key + "\n" for key in keys))
            return True

    def _load(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line:
                    self._ids[line] = None
            while len(self._ids) > self._capacity:
                self._ids.popitem(last=False)
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(f"{i}\n" for i in self._ids), encoding="utf-8")
        os.replace(tmp, path)
