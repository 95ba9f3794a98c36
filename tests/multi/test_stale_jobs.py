"""Jobs are planned by one daemon and run by another, later: a plan may be stale by then."""

from __future__ import annotations

from pathlib import Path

from bot.model.state import Status
from bot.store.base import QueuedJob
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, stepping_policy
from tests.rig import Rig
from tests.store.helpers import migrated


def test_a_start_planned_before_the_task_finished_starts_no_second_run(
    server: ForgeServer, model: LLMServer, pg_dsn: str, tmp_path: Path
) -> None:
    store = f"store: {{backend: postgres, dsn: '{migrated(pg_dsn)}'}}"
    rig = Rig(server, model, "github", tmp_path / "state", extra_config=store)
    model.policy = stepping_policy(steps=1)
    thread = rig.issue()
    try:
        rig.run_once()
        assert rig.state(thread).status is Status.DONE
        posted = rig.bot_comments(thread)
        # Another daemon's discovery saw the thread labelled and without state, before this
        # task started; its start job is taken only now, after the task finished.
        rig.store().enqueue([QueuedJob(rig.key(thread), fresh=True)])
        rig.run_once()
        assert rig.state(thread).run == 1 and rig.state(thread).status is Status.DONE
        assert rig.bot_comments(thread) == posted
        assert thread.labels == ["coding agent done"]
        # A real hand-back (a writer's `/bot`) still starts a new run.
        rig.comment(thread, "/bot")
        rig.run_once()
        assert rig.state(thread).run == 2
    finally:
        rig.close()
