"""`bot db import`: a files state dir with finished, paused and running tasks moves into
PostgreSQL, and the daemon continues each of them from the database."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from bot.model.state import Status
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, Reply, stepping_policy
from tests.conftest import REPO
from tests.processes import run_bot
from tests.rig import Rig, config_text


def _policy(server: ForgeServer, stop: threading.Event, numbers: dict[str, int]) -> Any:
    """Two progress notes, then finish; on its first request, "Pause me" gets a writer's
    `/bot pause` and "Stop here" stops the daemon (it checkpoints, the task stays running)."""
    steps = stepping_policy(steps=2)

    def policy(request: dict[str, Any]) -> Reply:
        text = json.dumps(request.get("messages", []))
        first = not any(m.get("role") == "tool" for m in request.get("messages", []))
        if first and "Pause me" in text:
            server.world.add_comment("github", REPO, numbers["Pause me"], "/bot pause")
        if first and "Stop here" in text:
            stop.set()
        return steps(request)

    return policy


def test_import_moves_finished_paused_and_running_tasks_and_the_daemon_continues_them(
    server: ForgeServer, model: LLMServer, pg_dsn: str, tmp_path: Path
) -> None:
    files = Rig(server, model, "github", tmp_path / "files")
    numbers: dict[str, int] = {}
    model.policy = _policy(server, files.stop, numbers)
    threads = {}
    for title in ("Finish me", "Pause me", "Stop here"):  # one phase each, in this order
        threads[title] = files.issue(title=title)
        numbers[title] = threads[title].number
        files.run_once()
    before = {t: files.state(th) for t, th in threads.items()}
    assert [s.status for s in before.values()] == [Status.DONE, Status.PAUSED, Status.RUNNING]
    talk = {t: files.conversation(th) for t, th in threads.items()}

    store = f"store: {{backend: postgres, dsn: '{pg_dsn}'}}"
    pg = Rig(server, model, "github", tmp_path / "cache", extra_config=store)
    config = tmp_path / "pg.yaml"
    config.write_text(config_text(pg.forge, pg.model, pg.state_dir, pg.extra_config))
    for args in (("db", "migrate"), ("db", "import", "--from", str(tmp_path / "files"))):
        done = run_bot(config, *args)
        assert done.returncode == 0, done.stderr[-2000:]
    try:
        for title, thread in threads.items():
            assert pg.state(thread).model_dump() == before[title].model_dump()
            assert pg.conversation(thread) == talk[title]
        posted = {t: len(pg.bot_comments(th)) for t, th in threads.items()}

        pg.run_once()  # the running one finishes; the paused one waits; the done one rests
        assert pg.state(threads["Stop here"]).status is Status.DONE
        assert len(pg.conversation(threads["Stop here"])) > len(talk["Stop here"])
        assert pg.state(threads["Pause me"]).status is Status.PAUSED
        assert len(pg.bot_comments(threads["Pause me"])) == posted["Pause me"]
        assert pg.state(threads["Finish me"]) == before["Finish me"]
        assert len(pg.bot_comments(threads["Finish me"])) == posted["Finish me"]

        pg.comment(threads["Pause me"], "/bot resume")
        pg.run_once()
        assert pg.state(threads["Pause me"]).status is Status.DONE
        for thread in threads.values():
            assert thread.labels == ["coding agent done"]
        assert not (tmp_path / "cache" / "tasks").exists(), "the tasks live in the database"
    finally:
        pg.close()
