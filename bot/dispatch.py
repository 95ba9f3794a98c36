"""Which discovered threads (and which saved states) get a worker this cycle, and how."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bot.config import LabelSettings
from bot.forge.types import Platform, TaskKey, TaskSummary
from bot.log import get_logger
from bot.state import StateError, StateStore, Status, TaskState

log = get_logger(__name__)


@dataclass(frozen=True)
class Job:
    key: TaskKey
    fresh: bool  # start a new run (no state, or a finished task handed back)


HandedBack = Callable[[TaskKey, TaskState], bool]


def plan_jobs(
    found: Iterable[TaskSummary],
    store: StateStore,
    saved: Iterable[TaskState],
    labels: LabelSettings,
    platform: Platform,
    handed_back: HandedBack = lambda _key, _state: False,
) -> list[Job]:
    """The state on disk is the truth; labels say what people want.

    - no state, trigger or processing label, or a writer's mention: start (processing without
      state: start over);
    - running (the daemon died or was stopped) or paused: resume / re-check the controls;
    - finished, trigger label added again or `/bot` from a writer (`handed_back`): a new run;
    - finished with a closing comment or label change still owed: finish that.
    """
    jobs: dict[TaskKey, Job] = {}
    for summary in found:
        try:
            state = store.load(summary.key)
        except StateError as exc:
            log.error("state_unreadable", task=str(summary.key), error=str(exc))
            continue
        job = _job_for(summary, state, labels, handed_back)
        if job is not None:
            jobs[job.key] = job
    for state in saved:  # every task on disk: a running or paused one is never forgotten
        key = state.task_key()
        if (
            key.platform is platform
            and key not in jobs
            and state.status in (Status.RUNNING, Status.PAUSED)
        ):
            jobs[key] = Job(key, fresh=False)
    return sorted(jobs.values(), key=lambda j: j.key)


def _job_for(
    summary: TaskSummary, state: TaskState | None, labels: LabelSettings, handed_back: HandedBack
) -> Job | None:
    key = summary.key
    if state is None:
        wanted = {labels.trigger, labels.processing} & summary.labels
        return Job(key, fresh=True) if wanted or summary.mentioned else None
    if not state.status.terminal:
        return Job(key, fresh=False)
    if labels.trigger in summary.labels or handed_back(key, state):
        return Job(key, fresh=True)
    if state.pending_post is not None or state.labels_applied != state.status:
        return Job(key, fresh=False)
    return None
