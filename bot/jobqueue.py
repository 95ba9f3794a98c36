"""The daemon's schedule: APScheduler 3 in UTC, one handler for every job error and miss."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime, timedelta

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler

from bot.log import get_logger

log = get_logger(__name__)


class JobQueue:
    """APScheduler 3 in UTC; every job error and missed run goes to one handler, logged."""

    def __init__(self) -> None:
        self._scheduler = BackgroundScheduler(
            timezone=UTC,
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30},
        )
        self._scheduler.add_listener(self._on_event, EVENT_JOB_ERROR | EVENT_JOB_MISSED)

    def every(self, seconds: float, fn: Callable[[], object], name: str, now: bool = True) -> None:
        """Run `fn` every `seconds`: the first time now, or (`now=False`) after `seconds`."""
        first = datetime.now(UTC) + (timedelta() if now else timedelta(seconds=seconds))
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

    @staticmethod
    def _on_event(event: JobExecutionEvent) -> None:
        if event.exception is not None:
            log.error(
                "job_failed",
                job=event.job_id,
                error=f"{type(event.exception).__name__}: {event.exception}",
                exc_info=(type(event.exception), event.exception, event.exception.__traceback__),
            )
        else:
            log.warning("job_missed", job=event.job_id)
