"""Labels mirror the task status on disk; they are changed only after the state is saved."""

from __future__ import annotations

from bot.core.config import LabelSettings
from bot.forge.base import Forge
from bot.model.state import Status
from bot.model.thread import TaskKey


def label_for(status: Status, labels: LabelSettings) -> str:
    return {
        Status.RUNNING: labels.processing,
        Status.PAUSED: labels.paused,
        Status.STOPPED: labels.stopped,
        Status.DONE: labels.done,
        Status.FAILED: labels.failed,
    }[status]


def sync_labels(
    forge: Forge, key: TaskKey, status: Status, labels: LabelSettings, current: frozenset[str]
) -> None:
    """Make the thread carry exactly the one managed label that matches `status`.

    The wanted label is added before the others are removed, so the thread is never without
    a managed label (discovery would lose sight of it).
    """
    want = label_for(status, labels)
    managed = set(labels.model_dump().values())
    if want not in current:
        forge.add_labels(key, [want])
    stale = sorted((managed & current) - {want})
    if stale:
        forge.remove_labels(key, stale)
