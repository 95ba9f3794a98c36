"""A database outage, as a real daemon's JSON log tells it (issue 19): `database_unavailable`
once when it starts, `database_back` once when it ends, every line a named event (psycopg_pool's
and APScheduler's records too), and the task in progress still done exactly once."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.model.state import Status
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, stepping_policy
from tests.conftest import REPO
from tests.multi.harness import Fleet, key, shared_config, wait_until
from tests.pg import Cluster

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A cluster of this test's own: it is stopped and started again."""
    with Cluster() as own:
        yield own


def _events(log: Path) -> list[dict[str, Any]]:
    events = []
    for line in log.read_text().splitlines():
        event = json.loads(line)  # every line of the daemon's output is one JSON event
        assert isinstance(event, dict) and "event" in event, line
        events.append(event)
    return events


def _count(log: Path, name: str) -> int:
    return sum(1 for line in log.read_text().splitlines() if f'"event": "{name}"' in line)


def test_an_outage_is_logged_once_when_it_starts_and_once_when_it_ends(
    cluster: Cluster, server: ForgeServer, model: LLMServer, tmp_path: Path
) -> None:
    thread = server.world.add_thread("github", REPO, title="Outage", labels=["coding agent"])
    model.policy = stepping_policy(steps=6, delay=0.5)
    config = shared_config(tmp_path, "d0", server, model, cluster.create_database(), 3.0)
    fleet = Fleet([config])
    fleet.migrate()
    log = fleet.log(0)
    fleet.start(0)
    try:
        wait_until(lambda: len(model.requests) >= 2, 60, "the task at work")
        cluster.halt()
        try:
            wait_until(lambda: _count(log, "database_unavailable") > 0, 60, "the outage seen")
            # Several renewals, takes and pool reconnections fail meanwhile.
            wait_until(lambda: _count(log, "database_connect_failed") >= 3, 60, "retries")
        finally:
            cluster.resume()
        wait_until(lambda: _count(log, "database_back") > 0, 120, "the database back")
        store = fleet.store()
        wait_until(
            lambda: (
                (s := store.load(key("github", thread.number))) is not None
                and s.status is Status.DONE
            ),
            120,
            "the task done after the outage",
        )
    finally:
        fleet.stop_all()
    events = _events(log)
    names = [e["event"] for e in events]
    assert names.count("database_unavailable") == 1, names
    assert names.count("database_back") == 1, names
    assert names.index("database_unavailable") < names.index("database_back")
    documented = (ROOT / "docs" / "log-events.md").read_text()
    libraries = [e for e in events if str(e["logger"]).startswith(("psycopg", "apscheduler"))]
    assert libraries, "the pool said nothing while it could not connect"
    for event in libraries:  # named, documented events: no library's free text
        assert NAME.match(event["event"]) and f"`{event['event']}`" in documented, event
    mine = [c for c in thread.comments if c.author.login == "coding-bot"]
    assert len([c for c in mine if "Finished after" in c.body]) == 1
