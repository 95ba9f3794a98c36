"""Which discovered threads (and which saved states) get a worker this cycle, and how."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, MutableSet, Sequence
from dataclasses import replace
from datetime import datetime

from bot.core.config import LabelSettings
from bot.core.log import get_logger
from bot.model.state import TaskState
from bot.model.thread import Platform, TaskKey, TaskSummary
from bot.store.base import QueuedJob, Store
from bot.store.errors import StateError
from bot.task.controls import Command
from bot.task.failures import waiting
from bot.task.handover import Decision, Need, Planning, Verdict, may_run

log = get_logger(__name__)


# A job: start a new run (`fresh`: no state, or a finished task handed back) or resume. The
# same value is queued for any daemon when several share a store.
Job = QueuedJob

# The trusted commands on a finished task since it finished (a comment list: asked only when
# the rule needs them).
SinceFinish = Callable[[TaskKey, TaskState], Sequence[Command]]
_FRESH = {
    Verdict.START: True,
    Verdict.NEW_RUN: True,
    Verdict.CONTINUE: False,
    Verdict.SETTLE: False,
}


def plan_jobs(
    found: Iterable[TaskSummary],
    store: Store,
    saved: Iterable[TaskState],
    labels: LabelSettings,
    platform: Platform,
    since_finish: SinceFinish = lambda _key, _state: (),
    bot_login: str | None = None,
    repos: Collection[str] | None = None,
    noted: MutableSet[str] | None = None,
    now: datetime | None = None,
) -> list[Job]:
    """The state on disk is the truth; labels say what people want (the rule:
    bot/task/handover.py, `Planning`).

    - no state, trigger or processing label, the bot assigned, or a writer's mention: start
      (processing without state: start over; who labelled or assigned it is checked when the
      task starts);
    - running (the daemon died or was stopped) or paused: resume / re-check the controls;
    - finished, trigger label added again or `/bot` from a writer (`since_finish`): a new run;
    - finished with a closing comment or label change still owed: finish that;
    - backing off after forge errors (`retry_at`): not this poll;
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
        job = _job_for(summary, state, labels, since_finish, bot_login, now)
        if job is not None:
            jobs[job.key] = job
    configured = None if repos is None else {r.lower() for r in repos}
    for state in saved:  # every task on disk: a running or paused one is never forgotten
        key = state.task_key()
        if key.platform is not platform or key in jobs or state.status.terminal:
            continue
        # Not found by discovery: its labels are unknown, and a saved run needs none.
        backing_off = waiting(state, now)
        job = _job(key, may_run(Planning(state, frozenset(), labels, backing_off=backing_off)))
        if job is None:
            continue
        if configured is not None and key.repo.lower() not in configured:
            _note_unconfigured(key, state, noted)
            continue
        jobs[key] = job
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
    since_finish: SinceFinish,
    bot_login: str | None = None,
    now: datetime | None = None,
) -> Job | None:
    facts = Planning(
        state,
        summary.labels,
        labels,
        assigned=bot_login is not None and bot_login in summary.assignees,
        called=summary.mentioned,
        backing_off=state is not None and waiting(state, now),
    )
    decision = may_run(facts)
    if decision.need is Need.COMMANDS:  # a finished thread the trigger label does not hand back
        assert state is not None
        decision = may_run(replace(facts, commands=since_finish(summary.key, state)))
    return _job(summary.key, decision)


def _job(key: TaskKey, decision: Decision) -> Job | None:
    fresh = _FRESH.get(decision.verdict)
    return None if fresh is None else Job(key, fresh=fresh)
