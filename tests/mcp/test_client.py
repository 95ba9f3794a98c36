"""The MCP adapter against real server processes: the scripted one (the SDK's own server)
and `mcp-server-time` from the package index, over stdio."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from bot.mcp import (
    McpCancelled,
    McpClient,
    McpDied,
    McpUnavailable,
    ServerHandle,
    StdioEndpoint,
)
from bot.mcp.spawn import clean_argv
from tests.mcp.conftest import TIME_SERVER, count_lines, scripted_command


@pytest.fixture
def count(tmp_path: Path) -> Path:
    return tmp_path / "count"


def handle(count: Path, env: dict[str, str] | None = None) -> ServerHandle:
    endpoint = StdioEndpoint(scripted_command(count), env or {})
    return ServerHandle("scripted", lambda: endpoint, timeout=30)


def never() -> bool:
    return False


def test_tools_are_listed_with_schema_and_read_only_hint(count: Path) -> None:
    server = handle(count)
    try:
        tools = {t.name: t for t in server.start()}
    finally:
        server.close()
    assert {"echo", "hang", "crash", "notes", "record"} <= set(tools)
    assert tools["echo"].read_only and not tools["record"].read_only
    assert tools["echo"].schema["properties"]["text"]["type"] == "string"


def test_no_configured_value_is_on_a_command_line() -> None:
    """Any user of the host reads a process's command line in /proc, not its environment."""
    secret = "trk_SECRETvalue_0123456789"
    argv = clean_argv(("/bin/true", "--flag"), {"TRACKER_TOKEN": secret, "PATH": "/usr/bin"})
    assert all(secret not in part for part in argv)
    assert argv[-2:] == ["/bin/true", "--flag"]
    # The SDK's own inherited variables are unset, except one the configuration sets.
    assert "--unset=HOME" in argv and "--unset=PATH" not in argv


def test_a_watch_cancels_a_hanging_call_and_the_server_hears_of_it(count: Path) -> None:
    server = handle(count)
    server.start()
    asked = threading.Event()

    def watch() -> bool:
        if count_lines(count, "hang"):
            asked.set()
        return asked.is_set()

    try:
        with pytest.raises(McpCancelled):
            server.call("hang", {}, watch)
        server.call("echo", {"text": "after"}, never)  # the connection is still good
    finally:
        server.close()
    assert count_lines(count, "cancelled") == 1


def test_a_watch_that_raises_cancels_the_call_and_raises(count: Path) -> None:
    server = handle(count)
    server.start()

    class Lost(Exception):
        pass

    def watch() -> bool:
        if count_lines(count, "hang"):
            raise Lost
        return False

    try:
        with pytest.raises(Lost):
            server.call("hang", {}, watch)
    finally:
        server.close()


def test_a_dead_server_is_restarted_once_then_given_up(count: Path) -> None:
    server = handle(count)
    server.start()
    try:
        with pytest.raises(McpDied, match="it was restarted"):
            server.call("crash", {}, never)
        assert count_lines(count, "start") == 2
        with pytest.raises(McpDied, match="not available"):
            server.call("crash", {}, never)
        with pytest.raises(McpUnavailable):
            server.call("echo", {"text": "x"}, never)
    finally:
        server.close()
    assert count_lines(count, "start") == 2
    assert count_lines(count, "crash") == 2


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    missing = McpClient("x", StdioEndpoint((str(tmp_path / "no-such-server"),)), 5)
    with pytest.raises(McpUnavailable, match="command not found"):
        missing.start()
    exits = McpClient("x", StdioEndpoint(("/bin/sh", "-c", "exit 1")), 5)
    with pytest.raises(McpUnavailable, match="exited before"):
        exits.start()
    silent = McpClient("x", StdioEndpoint(("/bin/sh", "-c", "cat >/dev/null")), 0.5)  # no answer
    with pytest.raises(McpUnavailable, match="no answer to the handshake in time"):
        silent.start()


def test_close_ends_the_server_process(count: Path) -> None:
    server = handle(count)
    server.start()
    server.close()
    # The process group the SDK made is gone: nothing answers signal 0 in it.
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        assert str(count).encode() not in cmdline


def test_mcp_server_time_from_the_package_index() -> None:
    server = ServerHandle("time", lambda: StdioEndpoint((TIME_SERVER,), {}), timeout=30)
    try:
        tools = {t.name: t for t in server.start()}
        result = server.call("get_current_time", {"timezone": "UTC"}, never)
    finally:
        server.close()
    assert {"get_current_time", "convert_time"} <= set(tools)
    assert '"timezone": "UTC"' in result.text or '"timezone":"UTC"' in result.text
