"""A directory walk without recursion, for trees that someone else built.

Python 3.11's `os.walk` recurses: a command in the jail (or an archive) can make a tree a few
thousand directories deep, and the daemon must neither crash on it nor descend forever.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

MAX_DEPTH = 64  # directories deeper than this are not looked into


def walk(
    root: Path, skipped: list[str] | None = None
) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk` (top-down, links not followed) without recursion: Python 3.11's os.walk
    recurses, and a command can make a tree 3,000 directories deep."""
    stack = [(str(root), 0)]
    while stack:
        top, depth = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        dirs = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        files = sorted(e.name for e in entries if not e.is_dir(follow_symlinks=False))
        yield top, dirs, files
        if depth >= MAX_DEPTH:
            if dirs and skipped is not None:
                skipped.append(f"{os.path.relpath(top, root)}/: deeper than {MAX_DEPTH} levels")
            continue
        stack.extend((os.path.join(top, d), depth + 1) for d in reversed(dirs))
