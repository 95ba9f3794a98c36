from __future__ import annotations

import io
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import structlog

from bot.core import log
from bot.service.jobqueue import JobQueue
from bot.store.errors import DatabaseError
from bot.store.pg_pool import Pool

SECRET = "ghp_LOGSECRET0123456789abcdefABCDEF"


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    log.configure("debug", [SECRET], stream=out)
    yield out
    structlog.contextvars.clear_contextvars()


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_with_utc_iso_timestamp_and_bound_task(stream: io.StringIO) -> None:
    with structlog.contextvars.bound_contextvars(task="github:a/b#1", repo="a/b"):
        log.get_logger("bot.test").info("step_done", step=3)
    (event,) = lines(stream)
    assert event["event"] == "step_done"
    assert event["task"] == "github:a/b#1" and event["repo"] == "a/b"
    assert str(event["timestamp"]).endswith("Z")
    assert event["level"] == "info"


def test_stdlib_loggers_share_the_renderer(stream: io.StringIO) -> None:
    with structlog.contextvars.bound_contextvars(task="t1"):
        logging.getLogger("urllib3.connectionpool").warning("Retrying %s", "GET /x")
    (event,) = lines(stream)
    assert event["event"] == "Retrying GET /x"
    assert event["logger"] == "urllib3.connectionpool"
    assert event["task"] == "t1"


def test_known_secret_redacted_everywhere(stream: io.StringIO) -> None:
    logger = log.get_logger("bot.test")
    logger.info(f"url with {SECRET}", header={"Authorization": f"token {SECRET}"}, items=[SECRET])
    logging.getLogger("github.Requester").error("sent %s", SECRET)
    try:
        raise RuntimeError(f"failed with {SECRET}")
    except RuntimeError:
        logger.exception("boom")
    output = stream.getvalue()
    assert SECRET not in output
    assert output.count(log.REDACTED) >= 5


def test_token_shapes_redacted_even_when_unknown(stream: io.StringIO) -> None:
    log.get_logger("x").info(
        "leak", gl="glpat-abcdefghijklmnopqrstu", oai="sk-abcdefghijklmnopqrstuvwxyz"
    )
    output = stream.getvalue()
    assert "glpat-abc" not in output and "sk-abcdef" not in output
    (event,) = lines(stream)  # logged, with the values replaced (not dropped)
    assert log.REDACTED in event["gl"] and log.REDACTED in event["oai"]


def test_tracebacks_have_no_local_variables(stream: io.StringIO) -> None:
    def fail() -> None:
        password_like = "local-value-must-not-appear"
        raise ValueError(len(password_like))

    try:
        fail()
    except ValueError:
        log.get_logger("x").exception("failed")
    (event,) = lines(stream)
    assert "local-value-must-not-appear" not in json.dumps(event)
    assert event["exception"]  # the traceback itself is there


# -- library records as named events (issue 19) ------------------------------------------------


def _wait(predicate: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_psycopg_pool_records_are_named_events_and_an_outage_is_told_once(
    stream: io.StringIO, tmp_path: Path
) -> None:
    """A real pool that cannot connect: its own lines are `database_connect_failed` with fields,
    and however many attempts fail, `database_unavailable` comes once."""
    where = f"host={tmp_path} port=1 dbname=bot"  # no server there
    pool = Pool(f"{where} connect_timeout=1", where=where, password="", size=2)
    pool.outage.armed = True  # as after a daemon's open
    pool.open(wait=False)
    try:
        _wait(lambda: stream.getvalue().count("database_connect_failed") >= 2, "retries")
        for _ in range(3):
            with pytest.raises(DatabaseError), pool.connection(timeout=0.2):
                pass
    finally:
        pool.close()
    events = lines(stream)
    failed = [e for e in events if e["event"] == "database_connect_failed"]
    assert failed[0]["logger"] == "psycopg.pool" and failed[0]["pool"] == pool.name
    assert str(tmp_path) in str(failed[0]["error"])
    assert not any("error connecting" in str(e["event"]) for e in events)
    (outage,) = [e for e in events if e["event"] == "database_unavailable"]
    assert outage["database"] == where and outage["level"] == "error"


def test_a_job_still_running_is_one_job_skipped_per_streak_without_apschedulers_text(
    stream: io.StringIO,
) -> None:
    skips: list[logging.LogRecord] = []  # APScheduler's own records, as they are emitted
    counter = logging.Handler()
    counter.emit = skips.append  # type: ignore[method-assign]
    logging.getLogger("apscheduler.scheduler").addHandler(counter)
    release = threading.Event()
    runs: list[int] = []

    def slow() -> None:
        runs.append(1)
        release.wait(20)

    queue = JobQueue()
    queue.every(0.1, slow, "take")
    queue.start()
    try:
        for streak in range(2):
            seen = len([r for r in skips if "skipped" in r.getMessage()])
            _wait(lambda n=seen: len([r for r in skips if "skipped" in r.getMessage()]) >= n + 3,
                  "three skipped runs")  # fmt: skip
            release.set()  # the run ends; the next one starts a new streak
            _wait(lambda s=streak: len(runs) >= s + 2, "the job running again")
            release.clear()
    finally:
        release.set()
        queue.shutdown()
        logging.getLogger("apscheduler.scheduler").removeHandler(counter)
    # At debug, other libraries' background threads (an HTTP client of an earlier test closing
    # its connections) may write too: the scheduler's and the job queue's lines are checked.
    events = [e for e in lines(stream) if str(e["logger"]).startswith(("apscheduler", "bot"))]
    skipped = [e for e in events if e["event"] == "job_skipped"]
    assert [(e["job"], e["reason"]) for e in skipped] == [("take", "still_running")] * 2
    assert "maximum number of running instances" not in stream.getvalue()
    assert all(re.match(r"^[a-z_]+$", str(e["event"])) for e in events), events


def test_apschedulers_lines_about_late_and_failed_jobs_are_left_to_the_job_queue(
    stream: io.StringIO,
) -> None:
    executor = logging.getLogger("apscheduler.executors.default")
    executor.warning(
        'Run time of job "%s" was missed by %s', "poll-github-0", timedelta(seconds=45)
    )
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        executor.exception('Job "%s" raised an exception', "poll-github-0")
    logging.getLogger("apscheduler.scheduler").info("Scheduler started")
    (event,) = lines(stream)  # only the line nothing else reports, named
    assert event["event"] == "scheduler_message" and event["message"] == "Scheduler started"
