"""What a task works on: its pinned snapshot (with the changeset), the target branch's
snapshot for a request's diff, and the thread's comments by number."""

from __future__ import annotations

import weakref
from pathlib import Path

from bot.core.config import Settings
from bot.core.log import get_logger
from bot.forge.base import Forge
from bot.model.thread import TaskKey, Thread
from bot.repo.protected import PathGuard
from bot.repo.snapshot import Limits, pinned_snapshot, refetch
from bot.repo.workspace import Workspace

log = get_logger(__name__)


def task_workspace(
    forge: Forge, key: TaskKey, sha: str, changes: dict[str, str | None], settings: Settings
) -> Workspace:
    """The pinned snapshot (cached by SHA) with the task's changeset on top.

    The snapshot stays pinned (never evicted) while the workspace is in use: until the
    daemon's pin scope for the task run ends, or the workspace is collected.
    """
    agent = settings.agent
    limits = Limits(max_files=agent.snapshot_max_files, max_total_bytes=agent.snapshot_max_bytes)
    cache = settings.state_dir / "cache"
    root, pin = pinned_snapshot(
        forge, key.repo, sha, cache, limits, settings.cache.max_snapshot_bytes
    )

    def again() -> Path:
        log.warning("snapshot_missing", sha=sha, action="downloading it again")
        return refetch(forge, key.repo, sha, cache, limits, pin)

    workspace = Workspace(root, changes, PathGuard.for_repo(agent, key.repo), refetch=again)
    weakref.finalize(workspace, pin.release)
    return workspace


def target_workspace(
    forge: Forge, thread: Thread, pinned: str | None, settings: Settings
) -> Workspace | None:
    """For a pull/merge request: its target branch, to show the request's diff."""
    key = thread.key
    if not key.is_change_request or not thread.base_ref:
        return None
    head = forge.resolve_branch(key.repo, thread.base_ref)
    if head is None or head.sha == pinned:
        return None
    return task_workspace(forge, key, head.sha, {}, settings)
