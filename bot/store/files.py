"""The files backend of `Store`: one daemon per state dir (flock), nothing to install."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bot.core.atomic import atomic_write
from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.model.state import TaskState
from bot.model.thread import TaskKey
from bot.store.base import DeliveryMemory, Holder, Lease, QueuedJob, Store, StoreIndex
from bot.store.errors import StateError
from bot.store.seen import SeenDeliveries
from bot.store.serial import json_text, state_json
from bot.store.task_files import Conversation, DaemonLock, StateStore
from bot.store.task_index import TaskIndex
from bot.store.transfer import TaskRecord

_OLD_RUN = re.compile(r"^(?:conversation\.run(\d+)\.jsonl|changes\.run(\d+)\.json)$")


class FileLease:
    """An flock held by this process: it cannot move to another daemon while we live."""

    token = 0

    def check(self) -> None:
        return None


class FileStore(StateStore):
    def __init__(self, root: Path, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(root, clock)
        self._daemon_lock = DaemonLock(root)
        self._index: TaskIndex | None = None
        self._deliveries: SeenDeliveries | None = None

    @property
    def shared(self) -> bool:
        return False

    @property
    def where(self) -> str:
        return str(self.root)

    def open(self, daemon: str) -> None:
        self._daemon_lock.acquire()

    def close(self) -> None:
        self._daemon_lock.release()

    def index(self) -> StoreIndex:
        if self._index is None:
            self._index = TaskIndex(self)  # a poll reads only the task files that changed
        return self._index

    @contextlib.contextmanager
    def task_lock(self, key: TaskKey) -> Iterator[Lease]:  # type: ignore[override]
        with super().task_lock(key):
            yield FileLease()

    def fenced(self, lease: Lease) -> Store:
        return self

    def archived_conversation(self, key: TaskKey, run: int) -> list[dict[str, Any]]:
        path = self.task_dir(key) / f"conversation.run{run}.jsonl"
        out: list[dict[str, Any]] = []
        with contextlib.suppress(FileNotFoundError):
            for line in path.read_bytes().split(b"\n"):
                with contextlib.suppress(ValueError):
                    entry = json.loads(line)
                    if isinstance(entry, dict):
                        out.append(entry)
        return out

    def remove(self, key: TaskKey, dry_run: bool = False) -> int:
        directory = self.task_dir(key)
        size = _size(directory)
        if not dry_run:
            # Renamed first (one atomic step), then deleted: a poll sees the whole task or none.
            doomed = directory.with_name(f".pruned-{directory.name}-{os.getpid()}")
            os.replace(directory, doomed)
            shutil.rmtree(doomed, ignore_errors=True)
        return size

    def drop_old_runs(
        self, state: TaskState, before: datetime, dry_run: bool = False
    ) -> tuple[int, int]:
        """Files of runs before the current one are never written again (a new run only
        archives the run before it), so they go without the task lock."""
        dropped = freed = 0
        for path in self.task_dir(state.task_key()).iterdir():
            match = _OLD_RUN.match(path.name)
            if match is None or int(match.group(1) or match.group(2)) >= state.run:
                continue
            try:
                stat = path.stat()
                if stat.st_mtime >= before.timestamp():
                    continue
                if not dry_run:
                    path.unlink()
            except OSError:
                continue
            dropped += 1
            freed += stat.st_size
        return dropped, freed

    def holders(self) -> dict[str, Holder]:
        return {}  # one daemon per state dir: `bot status` shows no holder column

    def deliveries(self) -> DeliveryMemory:
        if self._deliveries is None:
            self._deliveries = SeenDeliveries(self.root / "webhooks" / "seen-deliveries")
        return self._deliveries

    def discovery_cursor(self, name: str) -> str | None:
        path = self._cursor_path(name)
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise StateError(f"cannot read {path}: {exc}") from None

    def save_discovery_cursor(self, name: str, value: str) -> None:
        path = self._cursor_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, value.encode("utf-8"))

    def _cursor_path(self, name: str) -> Path:
        # One file per cursor, named by the cursor's name (escaped: names hold ':' and '/').
        return self.root / "discovery" / quote(name, safe="")

    def lead(self, role: str, seconds: float) -> bool:
        return True  # the only daemon

    def enqueue(self, jobs: Iterable[QueuedJob]) -> None:
        raise NotImplementedError("the files backend is not shared: jobs are run directly")

    def take(self, limit: int) -> list[QueuedJob]:
        return []

    # -- copying (bot db import / export) -----------------------------------------------------

    def export_task(self, key: TaskKey) -> TaskRecord | None:
        state = self.load(key)
        if state is None:
            return None
        directory = self.task_dir(key)
        record = TaskRecord(state, Conversation(directory / "conversation.jsonl").entries())
        for path in directory.iterdir():
            match = _OLD_RUN.match(path.name)
            if match is not None and match.group(1):
                record.runs[int(match.group(1))] = self.archived_conversation(key, int(match[1]))
            elif match is not None:
                record.changesets[int(match.group(2))] = json.loads(path.read_bytes())
        return record

    def import_task(self, record: TaskRecord) -> None:
        """Files first, task.json last (atomically): a task appears whole or not at all."""
        directory = self.task_dir(record.state.task_key())
        directory.mkdir(parents=True, exist_ok=True)
        for path in directory.iterdir():
            if path.name == "conversation.jsonl" or _OLD_RUN.match(path.name):
                path.unlink()
        for run, changes in record.changesets.items():
            data = json_text(changes, indent=1).encode("utf-8")
            atomic_write(directory / f"changes.run{run}.json", data)
        for run, entries in record.runs.items():
            atomic_write(directory / f"conversation.run{run}.jsonl", _jsonl(entries))
        if record.conversation:
            atomic_write(directory / "conversation.jsonl", _jsonl(record.conversation))
        atomic_write(directory / "task.json", state_json(record.state, indent=1))


def _jsonl(entries: list[dict[str, Any]]) -> bytes:
    lines = (json_text(e, separators=(",", ":")) + "\n" for e in entries)
    return "".join(lines).encode("utf-8")


def _size(directory: Path) -> int:
    total = 0
    for dirpath, _dirnames, filenames in os.walk(directory):
        for name in filenames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total
