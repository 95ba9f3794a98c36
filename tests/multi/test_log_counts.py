"""A daemon's log says what that daemon did to a task, once (issue 19): per-daemon counts from
the logs add up. The daemons here are in-process (`Rig`) on one database; each `run_once` is
one daemon's life."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from bot.model.state import Status
from bot.store.base import QueuedJob
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, stepping_policy
from tests.rig import Rig
from tests.store.helpers import migrated, sql

# Another daemon claims the task (the lease had expired while this one was frozen).
STEAL = """
UPDATE tasks SET lease_owner = 'another-daemon', lease_token = nextval('lease_tokens'),
    lease_expires = now() + interval '1 hour'
WHERE key = %s
"""


def _rig(server: ForgeServer, model: LLMServer, dsn: str, tmp_path: Path) -> Rig:
    store = f"store: {{backend: postgres, dsn: '{dsn}', lease_seconds: 3}}"
    return Rig(server, model, "github", tmp_path / "state", extra_config=store)


def _named(logs: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == event]


def test_a_lost_lease_is_logged_once(
    server: ForgeServer, model: LLMServer, pg_dsn: str, tmp_path: Path
) -> None:
    dsn = migrated(pg_dsn)
    rig = _rig(server, model, dsn, tmp_path)
    thread = rig.issue()
    stolen = threading.Event()

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        if not stolen.is_set():  # taken away during the model call; the renewals (every
            sql(dsn, STEAL, str(rig.key(thread)))  # second) find it before the reply comes
            stolen.set()
        return {"tool_calls": [("post_comment", {"body": "Progress note 1"})], "delay": 3.0}

    model.policy = policy
    try:
        with capture_logs() as logs:
            rig.run_once()
    finally:
        rig.close()
    assert stolen.is_set()
    assert len(_named(logs, "lease_lost")) == 1, _named(logs, "lease_lost")
    assert _named(logs, "task_outcome") == []  # it did not end the task: the other one will
    assert not any(c.body.startswith("Progress note") for c in thread.comments)


@pytest.mark.parametrize("fresh", [False, True], ids=["resume", "start"])
def test_a_daemon_that_finds_the_task_already_finished_logs_no_outcome_for_it(
    server: ForgeServer, model: LLMServer, pg_dsn: str, tmp_path: Path, fresh: bool
) -> None:
    rig = _rig(server, model, migrated(pg_dsn), tmp_path)
    model.policy = stepping_policy(steps=1)
    thread = rig.issue()
    try:
        with capture_logs() as first:
            rig.run_once()  # the daemon that works the task
        assert rig.state(thread).status is Status.DONE
        # A job planned while the task was still running (a resume) or before it started (a
        # start), taken by another daemon only now.
        rig.store().enqueue([QueuedJob(rig.key(thread), fresh=fresh)])
        with capture_logs() as second:
            rig.run_once()
    finally:
        rig.close()
    assert [e["outcome"] for e in _named(first, "task_outcome")] == ["done"]
    assert _named(second, "task_outcome") == []
    (stale,) = _named(second, "job_stale")
    assert stale["status"] == "done" and stale["run"] == 1


def test_a_daemon_that_only_settles_a_finished_tasks_labels_says_settled(
    server: ForgeServer, model: LLMServer, pg_dsn: str, tmp_path: Path
) -> None:
    rig = _rig(server, model, migrated(pg_dsn), tmp_path)
    model.policy = stepping_policy(steps=1)
    thread = rig.issue()
    try:
        rig.run_once()
        # The daemon that finished it was killed between saving `done` and labelling the thread.
        state = rig.state(thread)
        state.labels_applied = Status.RUNNING
        rig.store().save(state)
        rig.set_labels(thread, ["coding agent processing"])
        with capture_logs() as logs:
            rig.run_once()
    finally:
        rig.close()
    assert thread.labels == ["coding agent done"]
    assert [e["outcome"] for e in _named(logs, "task_outcome")] == ["settled"]
