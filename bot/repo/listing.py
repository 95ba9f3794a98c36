"""A snapshot's file list parsed once per process and shared by every workspace on it.

The opening context of a 50,000-file repository needs the paths (a set of them, and one by
file name), not 50,000 objects: reading and parsing the index on every build was most of its
time. A snapshot directory never changes once complete (it is named by its commit), so its
listing is kept in a small least-recently-used cache, keyed by what identifies the index file
on disk: a snapshot downloaded again or an index rewritten is a new key.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from functools import cached_property
from pathlib import Path

from bot.repo.snapshot import INDEX, read_index

# Snapshots whose listing stays parsed: about 6 MB for 50,000 files, 12 MB with `by_name`.
CACHED_LISTINGS = 4


class Listing:
    """Every file's path and size, in index order; the sets are made on first use."""

    def __init__(self, entries: Iterable[tuple[str, int]]) -> None:
        pairs = list(entries)
        self.paths: tuple[str, ...] = tuple(path for path, _size in pairs)
        self.sizes: tuple[int, ...] = tuple(size for _path, size in pairs)

    def __len__(self) -> int:
        return len(self.paths)

    @cached_property
    def known(self) -> frozenset[str]:
        return frozenset(self.paths)

    @cached_property
    def by_name(self) -> Mapping[str, str | None]:
        """File name -> its path, or None when several files have it: resolves a bare name
        people wrote (no list per name: it stays in memory with the listing)."""
        return unique_names(self.paths)


_cache: OrderedDict[tuple[object, ...], Listing] = OrderedDict()
_lock = threading.Lock()


def snapshot_listing(root: Path) -> Listing:
    """The snapshot's listing, parsed at most once while it stays among the recent ones."""
    key = _key(root)
    if key is not None:
        with _lock:
            found = _cache.get(key)
            if found is not None:
                _cache.move_to_end(key)
                return found
    listing = Listing(read_index(root))  # writes the index when the snapshot had none
    key = key or _key(root)
    if key is not None:
        with _lock:
            _cache[key] = listing
            while len(_cache) > CACHED_LISTINGS:
                _cache.popitem(last=False)
    return listing


def _key(root: Path) -> tuple[object, ...] | None:
    try:
        directory, index = os.stat(root), os.stat(root / INDEX)
    except OSError:
        return None
    return (
        os.path.abspath(root),
        directory.st_ino,
        index.st_ino,
        index.st_mtime_ns,
        index.st_ctime_ns,
        index.st_size,
    )


def unique_names(paths: Iterable[str]) -> dict[str, str | None]:
    """File name -> its path, or None when several of `paths` have that name."""
    out: dict[str, str | None] = {}
    for path in paths:
        name = path.rpartition("/")[2]
        out[name] = None if name in out else path
    return out
