from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from bot import log

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
