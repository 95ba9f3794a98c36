"""One configured server within a task run: started once, restarted once if it dies, then
given up on, its tools answering with an error the model reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.core.log import get_logger
from bot.mcp.base import CallResult, Endpoint, McpDied, McpUnavailable, RemoteTool
from bot.mcp.client import McpClient, Watch

log = get_logger(__name__)
RESTARTS = 1


class ServerHandle:
    """`endpoint()` is asked again for a restart (a jailed server's command line is rebuilt)."""

    def __init__(
        self,
        name: str,
        endpoint: Callable[[], Endpoint],
        timeout: float,
        connect: Callable[[str, Endpoint, float], McpClient] = McpClient,
    ) -> None:
        self.name = name
        self._endpoint = endpoint
        self._timeout = timeout
        self._connect = connect
        self._client: McpClient | None = None
        self._restarts = RESTARTS
        self.given_up = False

    def start(self) -> list[RemoteTool]:
        """The server's tools; McpUnavailable when it does not start."""
        client = self._connect(self.name, self._endpoint(), self._timeout)
        tools = client.start()
        self._client = client
        log.info("mcp_server_started", server=self.name, tools=len(tools))
        return tools

    def call(self, tool: str, arguments: dict[str, Any], watch: Watch) -> CallResult:
        """The tool's answer. McpDied (the server stopped during the call; restarted if it may
        be), McpUnavailable (given up on), McpTimeout, McpCancelled, or what `watch` raised."""
        client = self._client
        if client is None or client.dead:
            client = self._revive()
        try:
            return client.call(tool, arguments, watch)
        except McpDied as exc:
            log.warning("mcp_server_died", server=self.name, tool=tool)
            client.close()
            self._client = None
            if self._restarts > 0:
                self._revive()
                raise McpDied(f"{exc}; it was restarted") from None
            self.given_up = True
            raise McpDied(f"{exc} again; its tools are not available in this run") from None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
            log.info("mcp_server_closed", server=self.name)

    def _revive(self) -> McpClient:
        if self.given_up or self._restarts <= 0:
            self.given_up = True
            raise McpUnavailable(
                "the server stopped twice; its tools are not available in this run"
            )
        self._restarts -= 1
        if self._client is not None:
            self._client.close()
            self._client = None
        try:
            self.start()
        except McpUnavailable as exc:
            self.given_up = True
            log.warning("mcp_server_failed", server=self.name, error=str(exc))
            raise McpUnavailable(f"it could not be restarted ({exc})") from None
        log.info("mcp_server_restarted", server=self.name)
        assert self._client is not None
        return self._client
