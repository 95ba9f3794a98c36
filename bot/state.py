"""Per-task state on disk. The state on disk is the truth; labels follow it.

Layout under `state_dir`:
    daemon.lock                                  flock held by the one running daemon
    tasks/<platform>/<owner__repo>/<kind>-<n>/
        task.json           atomic: temp file, fsync, os.replace, fsync of the directory
        conversation.jsonl  append-only, fsync per append; a torn last line is dropped
        lock                flock held by the worker on this task
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from pydantic_core import PydanticSerializationError

from bot.forge.types import TaskKey


class StateError(Exception):
    """The state dir cannot be used (locked by another daemon, unreadable, corrupt)."""


class TaskBusy(StateError):
    """Another worker holds this task's lock."""


class DatabaseError(StateError):
    """The database could not be reached, or refused a statement (postgres backend)."""


class LeaseLost(StateError):
    """This daemon's lease on a task has expired or moved to another daemon: it must not act."""


class Status(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"
    DONE = "done"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (Status.STOPPED, Status.DONE, Status.FAILED)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class PendingPost(BaseModel):
    """A comment we are about to post: if we die, the marker tells whether it landed."""

    seq: int
    purpose: str
    body: str
    call_id: str | None = None  # the tool call this post carries out, if any
    reply_to: str | None = None  # answer in this comment's review thread
    created_at: str = Field(default_factory=lambda: now_iso())


class PlanItem(BaseModel):
    text: str
    done: bool = False


class Usage(BaseModel):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class TaskState(BaseModel):
    key: str
    run: int = 1
    status: Status = Status.RUNNING
    step: int = 0
    # Comment id -> updated_at of the version delivered (or deliberately skipped).
    seen: dict[str, str] = Field(default_factory=dict)
    comments_since: str | None = None
    initialized: bool = False
    next_seq: int = 1
    pending_post: PendingPost | None = None
    posted: dict[str, str] = Field(default_factory=dict)  # seq -> comment id
    # Results of side-effecting tool calls that happened but are not yet in the conversation:
    # after a crash the call is answered from here instead of being carried out twice.
    tool_journal: dict[str, str] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    malformed_streak: int = 0
    llm_failures: int = 0  # consecutive model calls that failed after the client's retries
    # Consecutive runs that ended on a forge error, and when the next may start (backoff).
    forge_failures: int = 0
    retry_at: str | None = None
    check_rounds: int = 0  # times failing checks were handed back to the model this run
    reason: str | None = None
    final_answer: str | None = None
    labels_applied: str | None = None  # the status the labels last reflected
    # The work: pinned commit, changeset (path -> text, None = deleted), plan, publication.
    base_sha: str | None = None
    base_branch: str | None = None
    changes: dict[str, str | None] = Field(default_factory=dict)
    plan: list[PlanItem] = Field(default_factory=list)
    progress_comment_id: str | None = None
    progress_seq: int | None = None
    branch: str | None = None
    # Where `branch` is: its repository (None: the task's own; a fork's path) and the kind of
    # destination (bot/agent/destination.py `Where`; None in states saved before it existed).
    branch_repo: str | None = None
    branch_kind: str | None = None
    commit_sha: str | None = None
    change_request_url: str | None = None
    previous_summary: str | None = None
    # A finished task's changeset lives in this file beside task.json (kept for audit), so that
    # the task.json of a finished task stays small.
    changes_file: str | None = None
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)

    def task_key(self) -> TaskKey:
        return TaskKey.parse(self.key)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a reader sees the old or the new file, never half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _fsync_dir(path.parent)


def json_text(value: Any, **options: Any) -> str:
    """`value` as JSON text that UTF-8 can encode: non-ASCII kept as written, except lone
    surrogates ("\\ud83d" in a forge's JSON, a cut emoji), which only an escape can carry."""
    text = json.dumps(value, ensure_ascii=False, **options)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(value, **options)
    return text


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
    def __init__(self, root: Path) -> None:
        self.root = root

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
        state.updated_at = now_iso()
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


@dataclass(frozen=True)
class Unreadable:
    where: str  # a task file's path, or a task key in the database
    reason: str


def parse_state(raw: bytes) -> TaskState:
    """A task.json's content; StateError names what is wrong (never its values)."""
    try:
        return TaskState.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        if first["type"] == "json_invalid":
            raise StateError(f"not valid JSON ({first['msg']})") from None
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        raise StateError(f"not a valid task state: {where}: {first['msg']}") from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def state_json(state: TaskState, indent: int | None = None) -> bytes:
    """A state's JSON, UTF-8. A lone surrogate (a cut emoji escaped in a forge's or a model's
    JSON) cannot be encoded, and pydantic would not read its escape back: it becomes U+FFFD,
    since a state that cannot be saved would stop its task at every cycle."""
    try:
        return state.model_dump_json(indent=indent).encode("utf-8")
    except PydanticSerializationError:
        clean = TaskState.model_validate(_scrub(state.model_dump()))
        return clean.model_dump_json(indent=indent).encode("utf-8")


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


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
