"""An in-process rig: emulated forge + scripted model + a real Daemon on a temp state dir."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.app import build_daemon
from bot.core.config import Settings, parse_settings
from bot.forge.factory import build_sources
from bot.model.state import TaskState
from bot.model.thread import Kind, Platform, TaskKey
from bot.service.daemon import Daemon
from bot.store.base import Store
from bot.store.factory import build_store
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer
from bot_sandbox.world import SThread
from tests.conftest import BOT_TOKEN, REPO


def config_text(
    forge: ForgeServer,
    model: LLMServer,
    state_dir: Path,
    extra: str = "",
    llm: str = "",
    forge_timeout: float = 30,
    repos: str = REPO,
) -> str:
    return f"""
state_dir: {state_dir}
poll_interval_seconds: 5
max_concurrent_tasks: 4
github:
  api_url: "{forge.url}"
  token: {BOT_TOKEN}
  repositories: [{repos}]
  seconds_between_writes: 0
  timeout_seconds: {forge_timeout}
gitlab:
  url: "{forge.url}"
  token: {BOT_TOKEN}
  projects: [{repos}]
  timeout_seconds: {forge_timeout}
llm: {{base_url: "{model.url}", model: scripted-model, max_retries: 1{llm}}}
access: {{ignore_authors: ["github-actions[bot]", "renovate"]}}
{extra}
"""


class WallClock:
    """The wall clock, moved on by `advance`: a wait the forge asks for (GitHub's
    `X-Poll-Interval`) that a test does not sleep through. `freeze()`: from then on only
    `advance` moves it (a test that counts seconds exactly)."""

    def __init__(self) -> None:
        self.offset = 0.0
        self.frozen: float | None = None

    def __call__(self) -> float:
        return (time.time() if self.frozen is None else self.frozen) + self.offset

    def freeze(self) -> None:
        self.frozen = time.time()

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@dataclass
class Rig:
    forge: ForgeServer
    model: LLMServer
    platform: str
    state_dir: Path
    extra_config: str = ""
    llm_options: str = ""  # e.g. ", max_steps: 2"
    forge_timeout: float = 30
    repos: str = REPO  # the configured repositories (projects), comma-separated
    stop: threading.Event = field(default_factory=threading.Event)
    clock: WallClock = field(default_factory=WallClock)  # the forges' wall clock
    _store: Store | None = None

    @property
    def settings(self) -> Settings:
        return parse_settings(self._config_text(), {})

    def _config_text(self) -> str:
        return config_text(
            self.forge,
            self.model,
            self.state_dir,
            self.extra_config,
            self.llm_options,
            self.forge_timeout,
            self.repos,
        )

    def config_file(self, path: Path) -> Path:
        """The rig's configuration as a file, for the `bot` commands that read one."""
        path.write_text(
            self._config_text(),
            encoding="utf-8",
        )
        return path

    def daemon(self) -> Daemon:
        settings = self.settings
        daemon = build_daemon(
            settings,
            self.stop,
            sources=build_sources(settings, self.stop, wall_clock=self.clock),
        )
        daemon.initialize()
        return daemon

    def run_once(self) -> None:
        daemon = self.daemon()
        try:
            daemon.run_once()
        finally:
            daemon.close()

    def issue(self, **kwargs: Any) -> SThread:
        kwargs.setdefault("labels", ["coding agent"])
        kwargs.setdefault("title", "Please fix")
        kwargs.setdefault("body", "The greeting is wrong.")
        return self.forge.world.add_thread(self.platform, REPO, **kwargs)

    def comment(self, thread: SThread, body: str, author: str = "alice", **kwargs: Any) -> int:
        return self.forge.world.add_comment(
            self.platform, REPO, thread.number, body, author=author, kind=thread.kind, **kwargs
        ).id

    def set_labels(self, thread: SThread, labels: list[str]) -> None:
        self.forge.world.set_labels(self.platform, REPO, thread.number, labels, kind=thread.kind)

    def key(self, thread: SThread) -> TaskKey:
        kinds = {"issue": Kind.ISSUE, "pull": Kind.PULL, "mr": Kind.MERGE_REQUEST}
        return TaskKey(Platform(self.platform), REPO, kinds[thread.kind], thread.number)

    def state(self, thread: SThread) -> TaskState:
        state = self.store().load(self.key(thread))
        assert state is not None
        return state

    def store(self) -> Store:
        """The configured store (files in `state_dir`, or PostgreSQL via `extra_config`), one
        per rig (each PostgreSQL store holds a connection pool)."""
        if self._store is None:
            self._store = build_store(self.settings)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def conversation(self, thread: SThread) -> list[dict[str, Any]]:
        return self.store().conversation(self.key(thread)).entries()

    def delivered_ids(self, thread: SThread) -> list[str]:
        """Comment ids in the persisted conversation, in order, with repeats."""
        return [
            str(ref["id"]) for e in self.conversation(thread) for ref in e.get("comments") or []
        ]

    def bot_comments(self, thread: SThread) -> list[str]:
        return [c.body for c in thread.comments if c.author.login == "coding-bot"]


def comment_id(platform: str, raw: int) -> str:
    return f"issue:{raw}" if platform == "github" else str(raw)
