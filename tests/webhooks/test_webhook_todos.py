"""A GitLab mention handled through the webhook: its To-Do item is marked done then, not at
the next sweep (the daemon polls once at start, then not for an hour)."""

from __future__ import annotations

from pathlib import Path

from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer
from bot_sandbox.world import SThread
from tests.rig import Rig
from tests.webhooks.test_webhook_e2e import done, polls, running, wait_for


def _todos(server: ForgeServer, thread: SThread) -> set[str]:
    return {t.state for t in server.todos.get("coding-bot", []) if t.thread is thread}


def test_a_mentions_todo_is_marked_done_when_the_webhook_handled_it(
    server: ForgeServer, model: LLMServer, tmp_path: Path
) -> None:
    rig = Rig(server, model, "gitlab", tmp_path / "state")
    with running(rig) as (daemon, _sender):
        ignored = rig.issue(labels=[], title="Not me", body="src/app.py should print hello.")
        rig.comment(ignored, "@coding-bot please do it", author="bob")  # bob can only read
        thread = rig.issue(labels=[], title="Say hello", body="src/app.py should print hello.")
        rig.comment(thread, "@coding-bot could you take this?")  # alice can write
        wait_for(lambda: done(rig, thread))
        wait_for(lambda: _todos(server, thread) == {"done"}, timeout=20)
        wait_for(lambda: _todos(server, ignored) == {"done"}, timeout=20)  # checked: nothing
        assert polls(daemon) == len(daemon.sources)  # no sweep since the start
