"""The daemon's schedule: APScheduler 3 in UTC, one handler for every job error, miss and skip
(APScheduler's own lines about them are left out of the log: `bot.core.log_libraries`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, timedelta

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
    JobExecutionEvent,
)
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler

from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.log import get_logger

log = get_logger(__name__)


class JobQueue:
    """APScheduler 3 in UTC; every job error and missed run goes to one handler, logged."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        # Our readings: first run times and how late a missed run was. APScheduler's loop
        # keeps its own (it reads the host's clock to wake up).
        self._clock = clock
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30},
        )
        # Jobs whose last run was skipped (still running): logged once until they run again.
        self._skipping: set[str] = set()
        self._lock = threading.Lock()  # events come from the scheduler's and the jobs' threads
        self._scheduler.add_listener(
            self._on_event,
            EVENT_JOB_ERROR | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_EXECUTED,
        )

    def every(self, seconds: float, fn: Callable[[], object], name: str, now: bool = True) -> None:
        """Run `fn` every `seconds`: the first time now, or (`now=False`) after `seconds`."""
        first = self._clock.now() + (timedelta() if now else timedelta(seconds=seconds))
        self._scheduler.add_job(
            fn, "interval", seconds=seconds, id=name, name=name, next_run_time=first
        )

    def cancel(self, name: str) -> None:
        with suppress(JobLookupError):  # already gone
            self._scheduler.remove_job(name)

    def start(self) -> None:
        self._scheduler.start()

    def shutdown(self) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=True)

    def _on_event(self, event: JobEvent) -> None:
        if event.code == EVENT_JOB_MAX_INSTANCES:
            # The previous run is still going (a poll or a take waiting for the database):
            # one line when that starts, not one per skipped run.
            with self._lock:
                first = event.job_id not in self._skipping
                self._skipping.add(event.job_id)
            if first:
                log.warning("job_skipped", job=event.job_id, reason="still_running")
            return
        with self._lock:
            self._skipping.discard(event.job_id)  # it ran (or missed its time): a new streak
        if not isinstance(event, JobExecutionEvent) or event.code == EVENT_JOB_EXECUTED:
            return
        if event.exception is not None:
            log.error(
                "job_failed",
                job=event.job_id,
                error=f"{type(event.exception).__name__}: {event.exception}",
                exc_info=(type(event.exception), event.exception, event.exception.__traceback__),
            )
        else:
            late = self._clock.now() - event.scheduled_run_time
            log.warning("job_missed", job=event.job_id, late_seconds=round(late.total_seconds(), 1))
