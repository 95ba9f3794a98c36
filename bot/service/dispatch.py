"""Which discovered threads (and which saved states) get a worker this cycle, and how."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, MutableSet
from datetime import datetime

from bot.core.config import LabelSettings
from bot.core.log import get_logger
from bot.model.state import Status, TaskState
from bot.model.thread import Platform, TaskKey, TaskSummary
from bot.store.base import QueuedJob, Store
from bot.store.errors import StateError
from bot.task.failures import waiting

log = get_logger(__name__)


# A job: start a new run (`fresh`: no state, or a finished task handed back) or resume. The
# same value is queued for any daemon when several share a store.
Job = QueuedJob

HandedBack = Callable[[TaskKey, TaskState], bool]


def plan_jobs(
    found: Iterable[TaskSummary],
    store: Store,
    saved: Iterable[TaskState],
    labels: LabelSettings,
    platform: Platform,
    handed_back: HandedBack = lambda _key, _state: False,
    bot_login: str | None = None,
    repos: Collection[str] | None = None,
    noted: MutableSet[str] | None = None,
    now: datetime | None = None,
) -> list[Job]:
    """The state on disk is the truth; labels say what people want.

    - no state, trigger or processing label, the bot assigned, or a writer's mention: start
      (processing without state: start over; who labelled or assigned it is checked when the
      task starts);
    - running (the daemon died or was stopped) or paused: resume / re-check the controls;
    - finished, trigger label added again or `/bot` from a writer (`handed_back`): a new run;
    - finished with a closing comment or label change still owed: finish that;
    - a task on disk whose repository is no longer in `repos` (the config): left alone,
      logged once (per task, in `noted`).

    `now`: the daemon's clock, against which a backing-off task's `retry_at` is compared.
    """
    jobs: dict[TaskKey, Job] = {}
    for summary in found:
        try:
            state = store.load(summary.key)
        except StateError as exc:
            log.error("state_unreadable", task=str(summary.key), error=str(exc))
            continue
        if state is not None and waiting(state, now):
            continue  # backing off after forge errors (`retry_at`)
        job = _job_for(summary, state, labels, handed_back, bot_login)
        if job is not None:
            jobs[job.key] = job
    configured = None if repos is None else {r.lower() for r in repos}
    for state in saved:  # every task on disk: a running or paused one is never forgotten
        key = state.task_key()
        if (
            key.platform is not platform
            or key in jobs
            or state.status not in (Status.RUNNING, Status.PAUSED)
            or waiting(state, now)
        ):
            continue
        if configured is not None and key.repo.lower() not in configured:
            _note_unconfigured(key, state, noted)
            continue
        jobs[key] = Job(key, fresh=False)
    return sorted(jobs.values(), key=lambda j: j.key)


def _note_unconfigured(key: TaskKey, state: TaskState, noted: MutableSet[str] | None) -> None:
    if noted is not None and str(key) in noted:
        return
    if noted is not None:
        noted.add(str(key))
    log.info(
        "task_left_alone",
        task=str(key),
        status=state.status.value,
        reason="repository not in the config",
    )


def _job_for(
    summary: TaskSummary,
    state: TaskState | None,
    labels: LabelSettings,
    handed_back: HandedBack,
    bot_login: str | None = None,
) -> Job | None:
    key = summary.key
    if state is None:
        wanted = {labels.trigger, labels.processing} & summary.labels
        assigned = bot_login is not None and bot_login in summary.assignees
        return Job(key, fresh=True) if wanted or assigned or summary.mentioned else None
    if not state.status.terminal:
        return Job(key, fresh=False)
    if labels.trigger in summary.labels or handed_back(key, state):
        return Job(key, fresh=True)
    if state.pending_post is not None or state.labels_applied != state.status:
        return Job(key, fresh=False)
    return None
