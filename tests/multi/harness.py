"""Several real `bot run` processes sharing one PostgreSQL database and one emulator."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.core.config import load_settings
from bot.model.thread import Kind, Platform, TaskKey
from bot.store.base import Store
from bot.store.factory import build_store
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer
from tests.conftest import REPO
from tests.processes import bot_env, run_bot
from tests.rig import config_text

MARKER = re.compile(r"<!-- bot:(\S+):(\d+) -->")


def key(platform: str, number: int) -> TaskKey:
    return TaskKey(Platform(platform), REPO, Kind.ISSUE, number)


def shared_config(
    root: Path, name: str, forge: ForgeServer, model: LLMServer, dsn: str, lease: float
) -> Path:
    """One daemon's config: its own state dir (caches, heartbeat), the shared database."""
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    store = f"store: {{backend: postgres, dsn: '{dsn}', name: {name}, lease_seconds: {lease}}}"
    path = directory / "config.yaml"
    path.write_text(config_text(forge, model, directory / "state", store))
    return path


@dataclass
class Fleet:
    """N daemons, each restartable; `kill(i)` is SIGKILL, `freeze(i)` SIGSTOP."""

    configs: list[Path]
    procs: list[subprocess.Popen[str] | None] = field(default_factory=list)
    _store: Store | None = None

    def __post_init__(self) -> None:
        self.procs = [None] * len(self.configs)

    def migrate(self) -> None:
        done = run_bot(self.configs[0], "db", "migrate")
        assert done.returncode == 0, done.stderr[-2000:]

    def start(self, i: int) -> None:
        """Start daemon `i`; its output is appended to `log(i)` (a pipe nobody reads would
        block it)."""
        with open(self.log(i), "a", encoding="utf-8") as out:
            self.procs[i] = subprocess.Popen(
                [sys.executable, "-m", "bot", "run", "-c", str(self.configs[i])],
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env=bot_env(),
            )

    def log(self, i: int) -> Path:
        return self.configs[i].parent / "daemon.log"

    def start_all(self) -> None:
        for i in range(len(self.configs)):
            self.start(i)

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        if proc is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def signal(self, i: int, sig: signal.Signals) -> None:
        proc = self.procs[i]
        assert proc is not None
        proc.send_signal(sig)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for i, proc in enumerate(self.procs):
            if proc is None:
                continue
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self.procs[i] = None
        if self._store is not None:
            self._store.close()
            self._store = None

    def store(self) -> Store:
        """The shared store, as the test sees it (one pool for the whole test)."""
        if self._store is None:
            self._store = build_store(load_settings(self.configs[0]))
        return self._store


def wait_until(predicate: object, timeout: float, what: str, step: float = 0.2) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(step)
