"""SIGKILL of the real daemon in the middle of an MCP call: after the restart, a tool that is
not read-only is not called again; the model is told the call may not have happened."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from bot.model.thread import Kind, Platform, TaskKey
from bot.store.files import FileStore
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer
from tests.conftest import REPO
from tests.mcp.conftest import count_lines, scripted_command
from tests.mcp.rigging import calls, mcp_config, tool_results
from tests.processes import run_bot, start_bot, write_config


def _server_processes(count: Path) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if str(count).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def test_sigkill_during_a_call_never_repeats_a_tool_that_is_not_read_only(
    server: ForgeServer, model: LLMServer, platform: str, tmp_path: Path
) -> None:
    count = tmp_path / "count"
    # `trusted: true`: even a trusted server's tool is not called again unless it is read-only.
    servers = {"s": {"command": list(scripted_command(count)), "trusted": True}}
    config = write_config(tmp_path, server, model, extra=mcp_config(servers))
    thread = server.world.add_thread(
        platform, REPO, title="Record", body="Record it.", labels=["coding agent"]
    )
    model.policy = calls(("mcp__s__record", {"entry": "one"}), summary="Recorded, I hope.")
    proc = start_bot(config, "run", "--once", quiet=True)
    try:
        for _ in range(600):  # the first `record` hangs: the daemon is in the middle of it
            if count_lines(count, "record"):
                break
            time.sleep(0.1)
        assert count_lines(count, "record") == 1
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    for _ in range(100):  # the server dies with the daemon (its death signal)
        if not _server_processes(count):
            break
        time.sleep(0.1)
    assert _server_processes(count) == []

    done = run_bot(config, "run", "--once")
    assert done.returncode == 0, done.stderr[-2000:]

    assert count_lines(count, "record") == 1  # not made a second time
    key = TaskKey(Platform(platform), REPO, Kind.ISSUE, thread.number)
    entries = FileStore(tmp_path / "state").conversation(key).entries()
    [said] = tool_results(entries, "mcp__s__record")
    assert "may or may not have happened" in said and said in model.seen_text()
    state = json.loads(next((tmp_path / "state").rglob("task.json")).read_text())
    assert state["status"] == "done" and state["tool_started"] == {}
