"""The composition root: everything the daemon works with, built from the configuration in one
place, and closed again in reverse order, also when start-up fails half-way.

    with Application(settings, once=False) as app:   # sources, model, store, jail, daemon,
        app.run()                                     # metrics, webhooks and task page

Only `bot.cli` uses this module (docs/architecture.md): below it nothing builds its own
collaborators; each takes them as constructor arguments.
"""

from __future__ import annotations

import contextlib
import threading
from types import TracebackType

from bot.context.tokens import TokenCounter, encoding_for
from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.config import Settings
from bot.core.metrics import Metrics
from bot.forge.factory import Source, build_app, build_sources
from bot.jail import Jail
from bot.jail.factory import build_jail
from bot.llm.base import LLMClient
from bot.llm.factory import build_llm
from bot.service.app_refresh import AppRefresh
from bot.service.daemon import Daemon
from bot.service.listeners import plan_listeners
from bot.service.notify import Notifier
from bot.service.ui import build_page
from bot.service.webhooks.factory import build_webhook_app
from bot.store.factory import build_store
from bot.task.mcp_run import McpLauncher


class ListenError(Exception):
    """A listener of the configuration could not bind: `key` names it (exit 2)."""

    def __init__(self, key: str, listen: str, reason: str) -> None:
        super().__init__(f"{key} {listen}: {reason}")
        self.key = key


def build_daemon(
    settings: Settings,
    stop: threading.Event,
    *,
    sources: list[Source] | None = None,
    llm: LLMClient | None = None,
    metrics: Metrics | None = None,
    notifier: Notifier | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> Daemon:
    """A daemon with its collaborators built from `settings` (sources and model may be given,
    as tests and the sandbox do), every one on the same `clock`. Not initialised:
    `Daemon.initialize` takes the store."""
    metrics = metrics or Metrics()
    if sources is None:
        sources = build_sources(settings, stop, metrics, clock=clock)
    jail = build_jail(settings.jail, clock)
    return Daemon(
        settings,
        sources,
        llm or build_llm(settings.llm, stop),
        stop,
        metrics,
        notifier or Notifier(None),
        store=build_store(settings, clock),
        counter=TokenCounter(encoding_for(settings.llm.model, settings.llm.tokenizer)),
        jail=jail,
        app_refresh=_app_refresh(settings, stop, metrics, sources, clock),
        clock=clock,
        mcp=build_mcp(settings, jail),
    )


def build_mcp(settings: Settings, jail: Jail | None) -> McpLauncher | None:
    """The MCP servers' launcher (the official SDK's client), when `mcp.servers` has any."""
    if not settings.mcp.servers:
        return None
    return McpLauncher(settings.mcp, jail)


def _app_refresh(
    settings: Settings,
    stop: threading.Event,
    metrics: Metrics,
    sources: list[Source],
    clock: Clock,
) -> AppRefresh | None:
    """A GitHub App's re-reader, over the installations start-up read (or new ones, when it
    found none yet)."""
    if settings.github is None or settings.github.app is None:
        return None
    known = next((source.app for source in sources if source.app), None)
    return AppRefresh(lambda: known or build_app(settings, stop, metrics, clock))


class Application:
    """The running daemon and its listeners. `__enter__` builds and starts them in order; if a
    step fails, what was already opened is closed before the error leaves (the store's lock,
    the worker pools, a bound port), as python-telegram-bot's `Application.__aenter__` does."""

    def __init__(
        self,
        settings: Settings,
        *,
        once: bool,
        stop: threading.Event | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self.settings = settings
        self.once = once
        self.stop = stop or threading.Event()
        self.notifier = notifier or Notifier(None)
        self.metrics = Metrics()
        self._stack = contextlib.ExitStack()
        self._daemon: Daemon | None = None

    @property
    def daemon(self) -> Daemon:
        assert self._daemon is not None, "Application used outside `with`"
        return self._daemon

    def __enter__(self) -> Application:
        try:
            self._open()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stack.close()

    def run(self) -> None:
        """One discovery cycle (`once`) or until `stop` is set."""
        if self.once:
            self.daemon.run_once()
        else:
            self.daemon.run_forever()

    def _open(self) -> None:
        settings = self.settings
        # A GitHub App's installations are looked up here, as the daemon's identities are.
        daemon = build_daemon(settings, self.stop, metrics=self.metrics, notifier=self.notifier)
        self._stack.callback(daemon.close)
        daemon.initialize()
        self._daemon = daemon
        if settings.metrics is not None:
            try:
                closer = self.metrics.serve(settings.metrics.listen)
            except OSError as exc:
                raise ListenError("metrics.listen", settings.metrics.listen, _reason(exc)) from exc
            self._stack.callback(closer)
        if self.once:
            return
        hooks = build_webhook_app(settings, daemon.request_check, daemon.store.deliveries())
        page = build_page(settings, daemon.store)
        for planned in plan_listeners(settings, hooks, page):
            try:  # binding the port happens here: a taken port is a configuration error
                listener = planned.open()
            except OSError as exc:
                raise ListenError(planned.key, planned.listen, _reason(exc)) from exc
            listener.start()
            self._stack.callback(listener.stop)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)
