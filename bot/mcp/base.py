"""What the rest of the bot knows of an MCP server: endpoints, tools, results, errors.

No SDK object leaves the adapter: tools and results are copied into these plain types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class StdioEndpoint:
    """A server started as a child process speaking JSON-RPC over its stdin and stdout.

    `env` is its whole environment: nothing of the daemon's is inherited (bot/mcp/spawn.py).
    `cwd`: its working directory (a private empty one when None)."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: Path | None = None


@dataclass(frozen=True)
class HttpEndpoint:
    """A server reached over streamable HTTP; `headers` usually carry its credential."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)


Endpoint = StdioEndpoint | HttpEndpoint


@dataclass(frozen=True)
class RemoteTool:
    name: str
    description: str
    schema: dict[str, Any]  # the tool's JSON schema for its arguments, as the server gave it
    read_only: bool  # the server's `readOnlyHint`: a call changes nothing


@dataclass(frozen=True)
class CallResult:
    text: str  # every content block rendered as text (binary blocks named, not included)
    is_error: bool = False


class McpError(Exception):
    """A call or a start that did not work; the message is for the model or the operator."""


class McpUnavailable(McpError):
    """The server cannot be started or answered no handshake (or is given up on)."""


class McpDied(McpError):
    """The server's connection ended (the process exited) while a call was in flight."""


class McpTimeout(McpError):
    """The call took longer than `mcp.timeout_seconds`; it was cancelled."""


class McpCancelled(McpError):
    """The caller's watch asked to stop waiting (pause, stop, SIGTERM): the call was cancelled."""
