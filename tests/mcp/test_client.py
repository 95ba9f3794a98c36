"""The MCP adapter against real server processes over stdio: the scripted one (the SDK's own
server) and ones that do not start or answer. Calls, cancellation, restarts and the package
index's server are driven end to end (test_mcp_e2e.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bot.mcp import HttpEndpoint, McpClient, McpUnavailable, ServerHandle, StdioEndpoint
from bot.mcp.spawn import clean_argv
from tests.mcp.conftest import scripted_command


@pytest.fixture
def count(tmp_path: Path) -> Path:
    return tmp_path / "count"


def handle(count: Path) -> ServerHandle:
    endpoint = StdioEndpoint(scripted_command(count))
    return ServerHandle("scripted", lambda: endpoint, timeout=30)


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


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
    nobody = McpClient("x", HttpEndpoint(f"http://127.0.0.1:{closed_port()}/mcp"), 5)
    with pytest.raises(McpUnavailable, match="cannot connect: ConnectError"):
        nobody.start()
