"""SIGKILL of the real daemon in the middle of an MCP call: after the restart, a tool that is
not read-only is not called again (the model is told the call may not have happened); a tool
the server marks read-only (`readOnlyHint`) is simply asked again."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from bot.model.thread import Kind, Platform, TaskKey
from bot.store.files import FileStore
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer
from tests.conftest import REPO
from tests.mcp.conftest import count_lines, scripted_command
from tests.mcp.rigging import mcp_config, server_processes, tool_results
from tests.processes import run_bot, start_bot, write_config
from tests.test_agent_e2e import call, scripted


# One forge each: the rule does not depend on the forge, and each case kills a real daemon.
@pytest.mark.parametrize(("platform", "tool"), [("github", "record"), ("gitlab", "lookup")])
def test_after_a_sigkill_mid_call_only_a_read_only_tool_is_asked_again(
    server: ForgeServer, model: LLMServer, platform: str, tmp_path: Path, tool: str
) -> None:
    count = tmp_path / "count"
    # `trusted: true`: even a trusted server's tool is not called again unless it is read-only.
    servers = {"s": {"command": list(scripted_command(count)), "trusted": True}}
    config = write_config(tmp_path, server, model, extra=mcp_config(servers))
    thread = server.world.add_thread(
        platform, REPO, title="Record", body="Record it.", labels=["coding agent"]
    )
    name = f"mcp__s__{tool}"
    model.policy = scripted(call(name, entry="one"), call("finish", summary="Recorded, I hope."))
    proc = start_bot(config, "run", "--once", quiet=True)
    try:
        for _ in range(600):  # the first call hangs: the daemon is in the middle of it
            if count_lines(count, tool):
                break
            time.sleep(0.1)
        assert count_lines(count, tool) == 1
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    for _ in range(100):  # the server dies with the daemon (its death signal)
        if not server_processes(count):
            break
        time.sleep(0.1)
    assert server_processes(count) == []

    done = run_bot(config, "run", "--once")
    assert done.returncode == 0, done.stderr[-2000:]

    key = TaskKey(Platform(platform), REPO, Kind.ISSUE, thread.number)
    entries = FileStore(tmp_path / "state").conversation(key).entries()
    [said] = tool_results(entries, name)
    assert said in model.seen_text()
    if tool == "record":
        assert count_lines(count, "record") == 1  # not made a second time
        assert "may or may not have happened" in said
    else:
        assert count_lines(count, "lookup") == 2  # read-only: asked again, answered
        assert said == "found one"
    state = json.loads(next((tmp_path / "state").rglob("task.json")).read_text())
    assert state["status"] == "done" and state["tool_started"] == {}
