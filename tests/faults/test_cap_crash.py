"""A real `bot` process killed (SIGKILL) between reaching a cap and its comment (issue 21,
deliver 3; docs/architecture.md, invariant 16).

The cap's pause and the comment's intent are saved in one write before the comment is posted,
so the next process posts it (once: its marker is looked up first) and the task stays paused.
Killed before the comment exists, a `/bot resume` written while the daemon was down answers
no question and does not renew the allowance; killed after it exists, it does. From the cap to
the answering resume no model call is made and no tool call runs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bot.model.state import Cap, Status
from bot.task.cap_note import CAP_HEADER
from bot_sandbox.forge_server import Fault, ForgeServer, RecordedRequest
from bot_sandbox.llm_server import LLMServer
from tests.processes import run_bot, start_bot, write_config
from tests.rig import Rig
from tests.test_agent_e2e import call

COMMENTS = {"github": r"^/repos/[^/]+/[^/]+/issues/\d+/comments$", "gitlab": r"/notes$"}


def tool_results(rig: Rig, thread: Any) -> int:
    return sum(1 for e in rig.conversation(thread) if e.get("role") == "tool")


def cap_comments(rig: Rig, thread: Any) -> list[str]:
    return [b for b in rig.bot_comments(thread) if b.startswith(CAP_HEADER)]


@pytest.mark.parametrize("moment", ["before the comment", "after the comment"])
def test_a_daemon_killed_between_the_cap_and_its_comment_asks_once_and_waits(
    server: ForgeServer, model: LLMServer, platform: str, tmp_path: Path, moment: str
) -> None:
    rig = Rig(server, model, platform, tmp_path / "state")  # its store and keys, to look
    rig.llm_options = ", max_steps: 2"
    thread = rig.issue()
    model.policy = lambda _request: call("read_file", path="README.md")
    config = write_config(tmp_path, server, model, llm=rig.llm_options)
    running: list[subprocess.Popen[str]] = []

    def kill_at_the_comment(record: RecordedRequest) -> None:
        if record.method == "POST" and re.search(COMMENTS[platform], record.path):
            server.before_response = None
            os.kill(running[0].pid, signal.SIGKILL)  # the process never learns what happened

    server.before_response = kill_at_the_comment
    if moment == "before the comment":  # a 503 first: the post never took effect
        server.add_fault(Fault(status=503, method="POST", path=COMMENTS[platform]))
    running.append(start_bot(config, "run", "--once", quiet=True))
    running[0].wait(timeout=120)
    assert running[0].returncode == -signal.SIGKILL
    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.capped is Cap.STEPS
    assert state.pending_post is not None and state.pending_post.purpose == "capped"
    assert len(cap_comments(rig, thread)) == (0 if moment == "before the comment" else 1)
    requests, results = len(model.requests), tool_results(rig, thread)
    assert requests == 2

    rig.comment(thread, "/bot resume")  # alice, while the daemon is down
    model.policy = lambda _request: call("finish", summary="Done.")
    done = run_bot(config, "run", "--once")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(cap_comments(rig, thread)) == 1  # asked once, whichever moment the kill came
    if moment == "before the comment":
        # The resume came before the question: no answer. The task waits, nothing ran.
        state = rig.state(thread)
        assert state.status is Status.PAUSED and state.pending_post is None
        assert thread.labels == ["coding agent paused"]
        assert (len(model.requests), tool_results(rig, thread)) == (requests, results)
        rig.comment(thread, "/bot resume")  # after the question: the answer
        done = run_bot(config, "run", "--once")
        assert done.returncode == 0, done.stderr[-2000:]
    state = rig.state(thread)
    assert state.status is Status.DONE and thread.labels == ["coding agent done"]
    assert len(model.requests) == requests + 1  # the waiting call ran, then `finish`
    assert tool_results(rig, thread) == results + 2
    rig.close()
