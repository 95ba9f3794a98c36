"""Issue 10, reproduction 6: SIGTERM during a slow model call. Before, the daemon waited for
the reply (up to `llm.timeout_seconds` times the retries), longer than the systemd unit's
`TimeoutStopSec=90`, and was killed. Now the call is abandoned, the task checkpointed, and the
cut turn is redone after the restart. A real `bot` process, the scripted model made slow."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from bot.model.state import Status
from bot.model.thread import Kind, Platform, TaskKey
from bot.store.task_files import StateStore
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, count_tool_results, stepping_policy
from tests.conftest import REPO
from tests.processes import run_bot, start_bot, write_config

SLOW = 600.0  # the model "thinks" for ten minutes: far beyond the unit's TimeoutStopSec=90
STOP_WAIT = 45.0  # how long the test waits for the process; half of TimeoutStopSec


def test_sigterm_abandons_a_slow_model_call_and_the_turn_resumes(
    server: ForgeServer, model: LLMServer, platform: str, tmp_path: Path
) -> None:
    thread = server.world.add_thread(platform, REPO, title="Slow", labels=["coding agent"])
    steps = stepping_policy(steps=2)
    slow = {"on": True}

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        reply = steps(request)
        if count_tool_results(request) == 1 and slow["on"]:
            reply["delay"] = SLOW
        return reply

    model.policy = policy
    config = write_config(tmp_path, server, model, llm=f", timeout_seconds: {SLOW * 2}")
    proc = start_bot(config, "run")
    try:
        deadline = time.monotonic() + 30
        while len(model.requests) < 2:  # the second call is the slow one
            assert time.monotonic() < deadline, "the daemon made no progress"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=STOP_WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    events = [json.loads(line)["event"] for line in out.splitlines() if line.startswith("{")]
    assert "model_call_cancelled" in events
    key = TaskKey(Platform(platform), REPO, Kind.ISSUE, thread.number)
    state = StateStore(tmp_path / "state").load(key)
    assert state is not None and state.status is Status.RUNNING and state.step == 1
    assert thread.labels == ["coding agent processing"]

    slow["on"] = False
    done = run_bot(config, "run", "--once")
    assert done.returncode == 0, done.stderr[-2000:]
    assert thread.labels == ["coding agent done"]
    notes = [c.body.split("\n")[0] for c in thread.comments if c.author.login == "coding-bot"]
    assert notes[:2] == ["Progress note 1", "Progress note 2"]  # the cut turn, once


def test_a_model_call_is_not_abandoned_without_a_stop(model: LLMServer) -> None:
    """The call runs on a helper thread only to be abandonable: its answer and its errors
    come back as before."""
    import threading

    from bot.llm.base import LLMError
    from bot.llm.openai_client import OpenAIClient
    from bot_sandbox.llm_server import Scripted

    client = OpenAIClient(model.url, "scripted-model", stop=threading.Event(), max_retries=0)
    model.push(Scripted(content="hello", delay=0.5), Scripted(status=500))
    assert client.complete([{"role": "user", "content": "hi"}], []).content == "hello"
    with pytest.raises(LLMError, match="500"):
        client.complete([{"role": "user", "content": "hi"}], [])
