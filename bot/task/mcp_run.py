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

import contextvars
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

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
R = TypeVar("R")


class JailedWork:
    """Where a jailed server works: an empty copy of its own, or the run's working copy."""

    def __init__(self, jail: Jail, shared: Callable[[], WorkCopy] | None) -> None:
        self.jail = jail
        self._shared = shared
        self._own: WorkCopy | None = None
        self._empty: Path | None = None
        self._lock = threading.Lock()

    def copy(self, working_copy: bool) -> WorkCopy:
        with self._lock:  # servers start at once, each on a thread of its own
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
        at_once([handle for handle, _tools in self._started or []], ServerHandle.close)
        self._started = None
        if self._work is not None:
            self._work.close()

    def _servers(self) -> list[tuple[ServerHandle, list[RemoteTool]]]:
        if self._started is None:
            handles = [self.launcher.handle(name, self._work) for name in self.offered]
            self._started = []
            for handle, started in zip(handles, at_once(handles, _start), strict=True):
                if isinstance(started, McpUnavailable):
                    # The run goes on without its tools; `bot check-config` says so at once.
                    log.warning("mcp_server_failed", server=handle.name, error=str(started))
                    handle.close()
                else:
                    self._started.append((handle, started))
        return self._started


def _start(handle: ServerHandle) -> list[RemoteTool] | McpUnavailable:
    try:
        return handle.start()
    except McpUnavailable as exc:
        return exc


def at_once(handles: Sequence[ServerHandle], do: Callable[[ServerHandle], R]) -> list[R]:
    """`do` for every server at the same time (a start or a close takes a second or more for
    some servers: a run waits for the slowest, not for their sum), each thread in the
    caller's context (the task's log fields); the results in order."""
    if len(handles) <= 1:
        return [do(handle) for handle in handles]
    with ThreadPoolExecutor(len(handles), thread_name_prefix="mcp-start") as pool:
        futures = [pool.submit(contextvars.copy_context().run, do, h) for h in handles]
        return [future.result() for future in futures]


def probe_servers(launcher: McpLauncher) -> dict[str, list[str]]:
    """`bot check-config`: every configured server started once, its tool names; a server
    that cannot start or answer is a ConfigError naming it."""
    work = JailedWork(launcher.jail, None) if launcher.jail is not None else None
    handles = [launcher.handle(name, work) for name in launcher.settings.servers]
    try:
        started = at_once(handles, _start)
    finally:
        at_once(handles, ServerHandle.close)
        if work is not None:
            work.close()
    out: dict[str, list[str]] = {}
    for handle, tools in zip(handles, started, strict=True):
        if isinstance(tools, McpUnavailable):
            raise ConfigError(f"mcp.servers.{handle.name}", str(tools))
        out[handle.name] = [tool.name for tool in tools]
    return out
