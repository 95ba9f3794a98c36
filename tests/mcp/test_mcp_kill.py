"""SIGKILL of the real daemon in the middle of MCP calls: after the restart, a tool that is
not read-only is not called again (the model is told the call may not have happened); a tool
the server marks read-only (`readOnlyHint`) is simply asked again."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from bot.model.thread import Kind, Platform, TaskKey
from bot.store.files import FileStore
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, count_tool_results
from tests.conftest import REPO
from tests.mcp.conftest import count_lines, scripted_command
from tests.mcp.rigging import mcp_config, server_processes, tool_results
from tests.processes import run_bot, start_bot, write_config
from tests.test_agent_e2e import call

# One task on each forge, in one daemon: GitHub's calls a tool with effects, GitLab's a
# read-only one; the first call of each hangs, and the daemon is killed while both do.
TOOLS = {"github": "record", "gitlab": "lookup"}


def policy(request: dict[str, Any]) -> dict[str, Any]:
    tool = "record" if "Record it." in json.dumps(request["messages"]) else "lookup"
    if count_tool_results(request) == 0:
        return call(f"mcp__s__{tool}", entry="one")
    return call("finish", summary="Done, I hope.")


def test_after_a_sigkill_mid_call_only_a_read_only_tool_is_asked_again(
    server: ForgeServer, model: LLMServer, tmp_path: Path
) -> None:
    count = tmp_path / "count"
    # `trusted: true`: even a trusted server's tool is not called again unless it is read-only.
    servers = {"s": {"command": list(scripted_command(count)), "trusted": True}}
    config = write_config(tmp_path, server, model, extra=mcp_config(servers))
    threads = {
        "github": server.world.add_thread(
            "github", REPO, title="Record", body="Record it.", labels=["coding agent"]
        ),
        "gitlab": server.world.add_thread(
            "gitlab", REPO, title="Look up", body="Look it up.", labels=["coding agent"]
        ),
    }
    model.policy = policy
    proc = start_bot(config, "run", "--once", quiet=True)
    try:
        for _ in range(600):  # each first call hangs: the daemon is in the middle of both
            if count_lines(count, "record") and count_lines(count, "lookup"):
                break
            time.sleep(0.1)
        assert count_lines(count, "record") == 1 and count_lines(count, "lookup") == 1
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    for _ in range(100):  # the servers die with the daemon (their death signal)
        if not server_processes(count):
            break
        time.sleep(0.1)
    assert server_processes(count) == []

    done = run_bot(config, "run", "--once")
    assert done.returncode == 0, done.stderr[-2000:]

    store = FileStore(tmp_path / "state")
    said = {}
    for platform, thread in threads.items():
        key = TaskKey(Platform(platform), REPO, Kind.ISSUE, thread.number)
        [said[platform]] = tool_results(
            store.conversation(key).entries(), f"mcp__s__{TOOLS[platform]}"
        )
        state = store.load(key)
        assert state is not None and state.status.value == "done" and state.tool_started == {}
        assert said[platform] in model.seen_text()
    assert count_lines(count, "record") == 1  # not made a second time
    assert "may or may not have happened" in said["github"]
    assert count_lines(count, "lookup") == 2  # read-only: asked again, and answered
    assert said["gitlab"] == "found one"
