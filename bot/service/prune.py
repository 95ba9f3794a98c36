"""`bot prune`: remove finished tasks (done, failed, stopped) older than a given age, and the
archived conversations and changesets of earlier runs older than it.

Safe while daemons run: each task is removed under its own task lock (a task being worked on
is skipped), and after it is read again under that lock (it may have been handed back in the
meantime). Each backend removes a task in one step: nothing ever sees half a task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.model.state import TaskState
from bot.store.base import Store
from bot.store.errors import StateError, TaskBusy

_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
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


def prune(store: Store, older_than: timedelta, now: datetime, dry_run: bool = False) -> PruneResult:
    cutoff = now - older_than
    result = PruneResult()
    states, _unreadable = store.scan()  # an unreadable task is never removed: it is not known
    for state in states:
        if not _expired(state, cutoff):
            dropped, freed = store.drop_old_runs(state, cutoff, dry_run)
            result.old_run_files += dropped
            result.freed_bytes += freed
            continue
        key = state.task_key()
        try:
            with store.task_lock(key) as lease:
                current = store.load(key)  # again, under the lock: it may have run meanwhile
                if current is None or not _expired(current, cutoff):
                    continue
                # Fenced: if we froze past the lease, a daemon may be working on it again.
                size = store.fenced(lease).remove(key, dry_run)
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


def _expired(state: TaskState, cutoff: datetime) -> bool:
    if not state.status.terminal:
        return False
    try:
        updated = datetime.fromisoformat(state.updated_at)
    except ValueError:
        return False
    return updated < cutoff
