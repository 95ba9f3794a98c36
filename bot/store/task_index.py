"""A cache of every task's status, so that a poll does not read every task.json.

The truth stays task.json (docs/architecture.md, invariant 5); this index only remembers what
each file said, together with the signature of the file it was read from (inode, mtime, size).
A refresh lists the task directories and stats their task.json (no file content is read), and
reads only the files whose signature changed, or that are new. A task.json written without the
index knowing (a crash between the two, an older version of the bot, an operator restoring a
backup) differs from the signature recorded and is read at the next refresh. The index file can
be deleted at any time: it is rebuilt from the task files.

Racy files: timestamps are coarse, and inode numbers are reused, so a file rewritten within one
timestamp tick could in theory show a signature recorded earlier. A file modified less than
RACY_SECONDS before it was read is not trusted: it is read again at every refresh until older.

The file is append-only JSON lines (`[dir, key, status, ino, mtime_ns, size]`, or `[dir]` when
the task is gone), rewritten atomically when it holds too many superseded lines.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from bot.core.atomic import atomic_write
from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.log import get_logger
from bot.model.state import Status, TaskState
from bot.store.errors import StateError
from bot.store.index_view import Entry, IndexView
from bot.store.serial import parse_state
from bot.store.task_files import StateStore

log = get_logger(__name__)
RACY_SECONDS = 2.0


class TaskIndex:
    def __init__(
        self, store: StateStore, path: Path | None = None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.store = store
        # Compared with the files' mtimes, which the kernel stamps: the host's clock (not the
        # daemon's), unless a test moves it.
        self._clock = clock
        self.path = path or store.root / "cache" / "task-index.jsonl"
        self._entries: dict[str, Entry] | None = None
        self._lines = 0
        self._reported: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def refresh(self) -> IndexView:
        """Every task's status; reads only the task files that changed since the last look."""
        with self._lock:
            view = IndexView()
            if self._entries is None:
                self._entries, view.bytes_read = self._load()
            changed: dict[str, Entry] = {}
            for rel, path in _task_files(self.store.root / "tasks"):
                entry = self._look(rel, path, view)
                if entry is None:
                    continue
                view.entries[rel] = entry
                if self._entries.get(rel) != entry:
                    changed[rel] = entry
            gone = [rel for rel in self._entries if rel not in view.entries]
            self._entries = dict(view.entries)
            if changed or gone:
                self._write(changed, gone)
            return view

    def active_states(self, view: IndexView) -> list[TaskState]:
        """The running and paused tasks, read from their task.json (the truth)."""
        states = []
        for key in view.active():
            try:
                state = self.store.load(key)
            except StateError as exc:
                log.error("state_unreadable", task=str(key), error=str(exc))
                continue
            if state is not None:
                states.append(state)
        return states

    # -- reading ------------------------------------------------------------------------------

    def _look(self, rel: str, path: Path, view: IndexView) -> Entry | None:
        assert self._entries is not None
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            return None  # a directory made for a lock, not (yet) a task
        except OSError as exc:
            self._unreadable(rel, f"cannot stat: {exc.strerror}", view)
            return None
        signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        known = self._entries.get(rel)
        if known is not None and known.signature == signature:
            return known
        try:
            raw = path.read_bytes()
            view.bytes_read += len(raw)
            state = parse_state(raw)
        except OSError as exc:
            self._unreadable(rel, f"cannot read: {exc.strerror}", view)
            return None
        except StateError as exc:
            self._unreadable(rel, str(exc), view)
            return None
        racy = self._clock.time() * 1e9 - stat.st_mtime_ns < RACY_SECONDS * 1e9
        return Entry(state.key, state.status, None if racy else signature)

    def _unreadable(self, rel: str, reason: str, view: IndexView) -> None:
        view.unreadable[rel] = reason
        if (rel, reason) not in self._reported:  # once per problem, not once per poll
            self._reported.add((rel, reason))
            log.error("state_unreadable", path=rel, error=reason)

    def _load(self) -> tuple[dict[str, Entry], int]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}, 0
        except OSError as exc:
            log.warning("task_index_unreadable", error=exc.strerror)
            return {}, 0
        entries: dict[str, Entry] = {}
        self._lines = 0
        for line in raw.split(b"\n"):
            self._lines += 1
            try:
                row = json.loads(line)
                if len(row) == 1:
                    entries.pop(str(row[0]), None)
                    continue
                rel, key, status, *numbers = row
                sig = (int(numbers[0]), int(numbers[1]), int(numbers[2])) if numbers else None
                entries[str(rel)] = Entry(str(key), Status(status), sig)
            except (ValueError, TypeError, IndexError):
                continue  # a torn line from a crash, or garbage: that task is read again
        return entries, len(raw)

    # -- writing ------------------------------------------------------------------------------

    def _write(self, changed: dict[str, Entry], gone: list[str]) -> None:
        assert self._entries is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self._lines + len(changed) + len(gone) > 2 * len(self._entries) + 1000:
                rows = [_row(rel, entry) for rel, entry in sorted(self._entries.items())]
                atomic_write(self.path, b"".join(rows))
                self._lines = len(rows)
                return
            rows = [_row(rel, entry) for rel, entry in changed.items()]
            rows += [json.dumps([rel]).encode() + b"\n" for rel in gone]
            with open(self.path, "ab") as handle:
                if handle.tell() and not _ends_with_newline(self.path):
                    handle.write(b"\n")  # after a torn last line: never glue onto garbage
                handle.write(b"".join(rows))
            self._lines += len(rows)
        except OSError as exc:
            # Only a cache: the next daemon start reads the task files whose entries are stale.
            log.warning("task_index_write_failed", error=exc.strerror)


def _row(rel: str, entry: Entry) -> bytes:
    row: list[object] = [rel, entry.key, entry.status.value]
    if entry.signature is not None:
        row.extend(entry.signature)
    return json.dumps(row, separators=(",", ":")).encode() + b"\n"


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def _task_files(tasks: Path) -> list[tuple[str, Path]]:
    """`<platform>/<repo>/<task>` and its task.json, in path order; dot names are skipped
    (`bot prune` renames a task away before it deletes it)."""
    found: list[tuple[str, Path]] = []
    for platform in _dirs(tasks):
        for repo in _dirs(platform):
            for task in _dirs(repo):
                rel = f"{platform.name}/{repo.name}/{task.name}"
                found.append((rel, task / "task.json"))
    return found


def _dirs(path: Path) -> list[Path]:
    try:
        with os.scandir(path) as it:
            names = [e.name for e in it if not e.name.startswith(".") and e.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [path / name for name in sorted(names)]
