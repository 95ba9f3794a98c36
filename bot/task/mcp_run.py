"""The MCP servers of one task run: started when the run first builds its tools over the
workspace, closed when the run ends, whichever way (done, failed, paused, stopped, SIGTERM,
a lost lease: `TaskRunner.run`'s `finally`). A paused task's resume check starts none.

How each server is started (`endpoint`): a stdio server as a child process with only its
configured environment and a private empty working directory; with `jail: true` inside the
jail (no network, only system directories), over an empty copy of its own or, with
`working_copy: true`, over the run's working copy mounted read-only. A URL server over
streamable HTTP with its configured headers. The forge token, the model key and the state
dir reach a server only if the operator puts them in its `env` or `headers`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.agent.mcp_tools import Offer, Watch, mcp_tools, within
from bot.agent.tools import Tool
from bot.context.tokens import TokenCounter
from bot.core.config import ConfigError
from bot.core.log import get_logger
from bot.core.mcp_settings import McpServerSettings, McpSettings
from bot.jail import Jail, WorkCopy
from bot.mcp import (
    Endpoint,
    HttpEndpoint,
    McpClient,
    McpUnavailable,
    RemoteTool,
    ServerHandle,
    StdioEndpoint,
)

log = get_logger(__name__)
# The MCP tools' schemas may take this share of a request's budget together (the built-in
# tools, the system prompt and the opening context come first); the rest are left out.
SCHEMA_SHARE = 0.25
Connect = Callable[[str, Endpoint, float], McpClient]


class JailedWork:
    """Where a jailed server works: an empty copy of its own, or the run's working copy."""

    def __init__(self, jail: Jail, shared: Callable[[], WorkCopy] | None) -> None:
        self.jail = jail
        self._shared = shared
        self._own: WorkCopy | None = None
        self._empty: Path | None = None

    def copy(self, working_copy: bool) -> WorkCopy:
        if working_copy and self._shared is not None:
            return self._shared()
        if self._own is None:
            self._empty = Path(tempfile.mkdtemp(prefix="bot-mcp-empty-"))
            self._own = self.jail.work_copy(self._empty, {})
        return self._own

    def close(self) -> None:
        if self._own is not None:
            self._own.remove()
            self._own = None
        if self._empty is not None:
            shutil.rmtree(self._empty, ignore_errors=True)
            self._empty = None


def endpoint(server: McpServerSettings, work: JailedWork | None) -> Endpoint:
    if server.url is not None:
        headers = {k: v.get_secret_value() for k, v in server.headers.items()}
        return HttpEndpoint(server.url, headers)
    assert server.command is not None
    env = {k: v.get_secret_value() for k, v in server.env.items()}
    if not server.jail:
        return StdioEndpoint(server.command, env)
    if work is None:
        raise McpUnavailable("jail: true needs jail.enabled: true")
    copy = work.copy(server.working_copy)
    launch = work.jail.server_launch(server.command, copy, env, read_only=True)
    return StdioEndpoint(launch.argv, launch.env)


@dataclass(frozen=True)
class McpLauncher:
    """What the composition root builds from `mcp:` (bot/app.py): the servers' settings, the
    jail for `jail: true`, and how a connection is made (the SDK's, or a test's)."""

    settings: McpSettings
    jail: Jail | None = None
    connect: Connect = McpClient

    def handle(self, name: str, work: JailedWork | None) -> ServerHandle:
        server = self.settings.servers[name]
        return ServerHandle(
            name, lambda: endpoint(server, work), self.settings.timeout_seconds, self.connect
        )

    def run(self, repo: str, shared_copy: Callable[[], WorkCopy] | None) -> McpRun:
        return McpRun(self, repo, shared_copy)


class McpRun:
    def __init__(
        self, launcher: McpLauncher, repo: str, shared_copy: Callable[[], WorkCopy] | None
    ) -> None:
        self.launcher = launcher
        self.offered = launcher.settings.offered(repo)
        jail = launcher.jail
        self._work = JailedWork(jail, shared_copy) if jail is not None else None
        self._started: list[tuple[ServerHandle, list[RemoteTool]]] | None = None
        self.left_out: list[str] = []  # tools whose schemas did not fit (for the context plan)

    def tools(
        self, counter: TokenCounter, result_budget: int, prompt_budget: int, watch: Watch
    ) -> list[Tool]:
        """The offered tools whose schemas fit SCHEMA_SHARE of `prompt_budget`; the servers
        start on the first ask."""
        if not self.offered:
            return []
        servers = self.launcher.settings.servers
        offers = [
            Offer(
                handle,
                tools,
                self.offered[handle.name],
                servers[handle.name].is_trusted,
                self._prepare(servers[handle.name]),
            )
            for handle, tools in self._servers()
        ]
        every = mcp_tools(offers, counter, result_budget, watch)
        budget = int(prompt_budget * SCHEMA_SHARE)
        kept, self.left_out = within(every, counter, budget)
        if self.left_out:
            log.warning("mcp_tools_left_out", tools=self.left_out, budget=budget)
        return kept

    def _prepare(self, server: McpServerSettings) -> Callable[[], None] | None:
        """A server over the run's working copy sees the task's changes as they are now."""
        work = self._work
        if not server.working_copy or work is None:
            return None

        def prepare() -> None:
            work.copy(working_copy=True)  # the run's copy, synced to the changeset

        return prepare

    def close(self) -> None:
        for handle, _tools in self._started or []:
            handle.close()
        self._started = None
        if self._work is not None:
            self._work.close()

    def _servers(self) -> list[tuple[ServerHandle, list[RemoteTool]]]:
        if self._started is None:
            self._started = []
            for name in self.offered:
                handle = self.launcher.handle(name, self._work)
                try:
                    self._started.append((handle, handle.start()))
                except McpUnavailable as exc:
                    # The run goes on without its tools; `bot check-config` says so at once.
                    log.warning("mcp_server_failed", server=name, error=str(exc))
                    handle.close()
        return self._started


def probe_servers(launcher: McpLauncher) -> dict[str, list[str]]:
    """`bot check-config`: every configured server started once, its tool names; a server
    that cannot start or answer is a ConfigError naming it."""
    out: dict[str, list[str]] = {}
    work = JailedWork(launcher.jail, None) if launcher.jail is not None else None
    try:
        for name in launcher.settings.servers:
            handle = launcher.handle(name, work)
            try:
                out[name] = [tool.name for tool in handle.start()]
            except McpUnavailable as exc:
                raise ConfigError(f"mcp.servers.{name}", str(exc)) from None
            finally:
                handle.close()
    finally:
        if work is not None:
            work.close()
    return out
