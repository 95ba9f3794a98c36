"""The files backend's own parts: one task's state and conversation files, and the state dir's
daemon lock."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bot.core.atomic import atomic_write
from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.model.state import TaskState, now_iso
from bot.model.thread import TaskKey
from bot.store.errors import StateError, TaskBusy, Unreadable
from bot.store.serial import json_text, parse_state, state_json


class Conversation:
    """Append-only JSON lines; each append is on disk (fsync) before it returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._repaired = False

    def append(self, entry: dict[str, Any]) -> None:
        line = json_text(entry, separators=(",", ":")) + "\n"
        if not self._repaired:
            self._drop_torn_tail()
        with open(self.path, "ab") as handle:
            handle.write(line.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())

    def entries(self) -> list[dict[str, Any]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out: list[dict[str, Any]] = []
        for line in raw.split(b"\n"):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue  # a torn last line from a crash: never a crash on load
            if isinstance(entry, dict):
                out.append(entry)
        return out

    def _drop_torn_tail(self) -> None:
        # A crash mid-append leaves a line without "\n"; appending after it would glue the
        # next entry to the garbage, so cut the file back to its last complete line.
        self._repaired = True
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        if raw and not raw.endswith(b"\n"):
            cut = raw.rfind(b"\n") + 1
            with open(self.path, "r+b") as handle:
                handle.truncate(cut)
                handle.flush()
                os.fsync(handle.fileno())


class StateStore:
    def __init__(self, root: Path, clock: Clock = SYSTEM_CLOCK) -> None:
        self.root = root
        self.clock = clock  # stamps `updated_at`

    def task_dir(self, key: TaskKey) -> Path:
        repo = key.repo.replace("/", "__")
        return self.root / "tasks" / key.platform.value / repo / f"{key.kind.value}-{key.number}"

    def load(self, key: TaskKey) -> TaskState | None:
        path = self.task_dir(key) / "task.json"
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(f"cannot read {path}: {exc.strerror}") from None
        try:
            return TaskState.model_validate_json(raw)
        except ValidationError as exc:
            raise StateError(
                f"{path} is not a valid task state ({exc.error_count()} errors)"
            ) from None

    def save(self, state: TaskState) -> None:
        state.updated_at = now_iso(clock=self.clock)
        directory = self.task_dir(state.task_key())
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write(directory / "task.json", _serialize(directory, state))

    def archived_changes(self, state: TaskState) -> dict[str, str | None]:
        """The changeset of a finished task: moved out of its task.json when it finished."""
        if state.changes or state.changes_file is None:
            return dict(state.changes)
        path = self.task_dir(state.task_key()) / state.changes_file
        data: dict[str, str | None] = json.loads(path.read_bytes())
        return data

    def conversation(self, key: TaskKey) -> Conversation:
        directory = self.task_dir(key)
        directory.mkdir(parents=True, exist_ok=True)
        return Conversation(directory / "conversation.jsonl")

    def archive_run(self, key: TaskKey, run: int) -> None:
        """Keep a finished run's conversation for audit when the task is triggered again."""
        path = self.task_dir(key) / "conversation.jsonl"
        if path.exists():
            os.replace(path, path.with_name(f"conversation.run{run}.jsonl"))

    def all_states(self) -> list[TaskState]:
        return self.scan()[0]

    def scan(self) -> tuple[list[TaskState], list[Unreadable]]:
        """Every task file, read and parsed; one bad file does not hide the rest, it is named."""
        states: list[TaskState] = []
        unreadable: list[Unreadable] = []
        for path in sorted((self.root / "tasks").glob("*/*/*/task.json")):
            try:
                states.append(parse_state(path.read_bytes()))
            except OSError as exc:
                unreadable.append(Unreadable(str(path), f"cannot read: {exc.strerror}"))
            except StateError as exc:
                unreadable.append(Unreadable(str(path), str(exc)))
        return states, unreadable

    @contextlib.contextmanager
    def task_lock(self, key: TaskKey) -> Iterator[None]:
        directory = self.task_dir(key)
        directory.mkdir(parents=True, exist_ok=True)
        with _flock(directory / "lock", f"task {key} is being worked on", TaskBusy):
            yield


def _serialize(directory: Path, state: TaskState) -> bytes:
    """task.json's bytes; a finished task's changeset is written to its own file first."""
    if not (state.status.terminal and state.changes):
        return state_json(state, indent=1)
    name = f"changes.run{state.run}.json"
    if state.changes_file != name or not (directory / name).exists():
        changes = json.dumps(state.changes, ensure_ascii=False, indent=1).encode("utf-8")
        atomic_write(directory / name, changes)  # before task.json: a crash loses nothing
        state.changes_file = name
    slim = state.model_copy(update={"changes": {}})
    return state_json(slim, indent=1)


@contextlib.contextmanager
def _flock(path: Path, busy: str, error: type[StateError]) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise error(busy) from None
        yield fd
    finally:
        os.close(fd)  # closing releases the lock, also when the process dies


class DaemonLock:
    """One daemon per state dir: an flock the kernel releases when the process dies."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "daemon.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StateError(f"cannot use state dir {self.path.parent}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StateError(
                f"state dir {self.path.parent} is in use by another daemon (pid {holder})"
            ) from None
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass  # the pid is for the "in use" message only; a full disk must not stop us

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
