"""The directory trees the opening context shows: computed from a snapshot's paths the first
time a context is built on it, then kept beside it."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from bot.context.render import render_tree, tree_children
from bot.repo.snapshot import TREES, TREES_VERSION


def cached_trees(root: Path, compute: Callable[[], dict[str, str]]) -> dict[str, str]:
    """Texts computed from the snapshot's paths alone, kept beside it after the first time."""
    path = root / TREES
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("version") == TREES_VERSION:
            return {str(k): str(v) for k, v in data["texts"].items()}
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    texts = compute()
    with contextlib.suppress(OSError):  # a read-only cache only costs the recomputation
        tmp = root / f"{TREES}.tmp"
        tmp.write_text(json.dumps({"version": TREES_VERSION, "texts": texts}), encoding="utf-8")
        os.replace(tmp, path)
    return texts


def snapshot_trees(paths: list[str]) -> dict[str, str]:
    """The directory trees the opening context shows (3 levels, and 1 as its summary)."""
    children = tree_children(paths, 3)  # one pass serves both depths
    return {"3": render_tree(children, 3), "1": render_tree(children, 1)}
