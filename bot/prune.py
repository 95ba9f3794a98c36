"""`bot prune`: remove finished tasks (done, failed, stopped) older than a given age, and the
archived conversations and changesets of earlier runs (`*.run<N>.*`) older than it.

Safe while the daemon runs: each task is removed under its own task lock (a task being worked
on is skipped), and after it is read again under that lock (it may have been handed back in the
meantime). The directory is renamed to a dot name first, so that nothing ever sees half a task.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from bot.state import StateError, StateStore, TaskBusy, TaskState

_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_OLD_RUN = re.compile(r"^(?:conversation\.run(\d+)\.jsonl|changes\.run(\d+)\.json)$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """`90s`, `45m`, `12h`, `30d`, `2w`."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not a duration; write a number and a unit: 90s, 45m, 12h, 30d or 2w"
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


@dataclass
class PruneResult:
    removed: list[str] = field(default_factory=list)
    busy: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "key: reason"
    old_run_files: int = 0
    freed_bytes: int = 0


def prune(
    store: StateStore, older_than: timedelta, now: datetime, dry_run: bool = False
) -> PruneResult:
    cutoff = now - older_than
    result = PruneResult()
    states, _unreadable = store.scan()  # an unreadable task is never removed: it is not known
    for state in states:
        if not _expired(state, cutoff):
            _drop_old_runs(store, state, cutoff, dry_run, result)
            continue
        key = state.task_key()
        try:
            with store.task_lock(key):
                current = store.load(key)  # again, under the lock: it may have run meanwhile
                if current is None or not _expired(current, cutoff):
                    continue
                directory = store.task_dir(key)
                size = _size(directory)
                if not dry_run:
                    _remove(directory)
        except TaskBusy:
            result.busy.append(state.key)
            continue
        except StateError:
            continue
        except OSError as exc:
            result.failed.append(f"{state.key}: {exc.strerror}")
            continue
        result.removed.append(state.key)
        result.freed_bytes += size
    return result


def _drop_old_runs(
    store: StateStore, state: TaskState, cutoff: datetime, dry_run: bool, result: PruneResult
) -> None:
    """Files of runs before the current one are never written again (a new run only archives
    the run before it), so they go without the task lock."""
    for path in store.task_dir(state.task_key()).iterdir():
        match = _OLD_RUN.match(path.name)
        if match is None or int(match.group(1) or match.group(2)) >= state.run:
            continue
        try:
            stat = path.stat()
            if stat.st_mtime >= cutoff.timestamp():
                continue
            if not dry_run:
                path.unlink()
        except OSError:
            continue
        result.old_run_files += 1
        result.freed_bytes += stat.st_size


def _expired(state: TaskState, cutoff: datetime) -> bool:
    if not state.status.terminal:
        return False
    try:
        updated = datetime.fromisoformat(state.updated_at)
    except ValueError:
        return False
    return updated < cutoff


def _size(directory: Path) -> int:
    total = 0
    for dirpath, _dirnames, filenames in os.walk(directory):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


def _remove(directory: Path) -> None:
    # Renamed first (one atomic step), then deleted: a poll sees the whole task or none of it.
    doomed = directory.with_name(f".pruned-{directory.name}-{os.getpid()}")
    os.replace(directory, doomed)
    shutil.rmtree(doomed, ignore_errors=True)
