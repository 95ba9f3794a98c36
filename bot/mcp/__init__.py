"""MCP servers behind a small synchronous face, on the official `mcp` SDK.

An adapter like `bot.llm` or `bot.jail`: it imports none of them. What a server is started as
(`Endpoint`) is decided above it (bot/task/mcp_run.py), which may wrap the command in the jail.
"""

from bot.mcp.base import (
    CallResult,
    Endpoint,
    HttpEndpoint,
    McpCancelled,
    McpDied,
    McpError,
    McpTimeout,
    McpUnavailable,
    RemoteTool,
    StdioEndpoint,
)
from bot.mcp.client import McpClient
from bot.mcp.server import ServerHandle

__all__ = [
    "CallResult",
    "Endpoint",
    "HttpEndpoint",
    "McpCancelled",
    "McpClient",
    "McpDied",
    "McpError",
    "McpTimeout",
    "McpUnavailable",
    "RemoteTool",
    "ServerHandle",
    "StdioEndpoint",
]
