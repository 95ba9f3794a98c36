"""One task run as a timeline: a view over the store, never a second log.

`build_timeline(store, key, run=None, price=None)` reads the task's state and one run's
conversation (the current run's, or an archived one's) and nothing else, so the timeline is
the same after a restart and on any daemon of a fleet, on both backends. Each conversation
entry becomes one `Entry`; entries written before entries carried times and usage (`at`,
`usage`, `duration`) still show, without them.

What each entry kind says, and where it is appended: `bot/task/entries.py`. Costs are exact
`Decimal`s at the price given (`llm.price`), None without one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from bot.core.clock import parse_time
from bot.core.pricing import Price
from bot.model.state import Usage
from bot.model.thread import TaskKey
from bot.store.base import Store
from bot.task.allowance import cost_of
from bot.task.entries import Entry, decimal_text, describe, iso

__all__ = ["Entry", "Timeline", "TimelineError", "Totals", "build_timeline", "totals"]


class TimelineError(LookupError):
    """No such task, or no such run of it (the message says which)."""


@dataclass(frozen=True)
class Totals:
    """Model calls and their tokens; the cost at the price given (None without one)."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal | None = None
    currency: str | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "tokens": self.tokens,
            "cost": decimal_text(self.cost),
            "currency": self.currency,
        }


@dataclass(frozen=True)
class Timeline:
    """One run of a task. `status` is the task's for the current run; an archived run's is the
    end its entries recorded (None when they hold none). `totals` are the run's (for the
    current run, the state's usage, which the caps count), `task_totals` every run's (earlier
    runs as the state carries them). `busy_seconds`: model calls, tools and checks together;
    `elapsed`: from the run's first entry to its last activity. `holder`: the daemon holding
    the task now, where the store knows (PostgreSQL)."""

    key: str
    run: int
    runs: int
    status: str | None
    reason: str | None
    step: int | None
    entries: tuple[Entry, ...]
    totals: Totals
    task_totals: Totals
    busy_seconds: float
    started: datetime | None
    last_activity: datetime | None
    holder: str | None = None

    @property
    def current(self) -> bool:
        return self.run == self.runs

    @property
    def elapsed(self) -> float | None:
        if self.started is None or self.last_activity is None:
            return None
        return max(0.0, (self.last_activity - self.started).total_seconds())

    def to_json(self) -> dict[str, Any]:
        """The shape `bot show --json` prints (README, "Commands")."""
        return {
            "key": self.key,
            "run": self.run,
            "runs": self.runs,
            "status": self.status,
            "reason": self.reason,
            "step": self.step,
            "holder": self.holder,
            "started": iso(self.started),
            "last_activity": iso(self.last_activity),
            "elapsed_seconds": self.elapsed,
            "busy_seconds": self.busy_seconds,
            "totals": self.totals.to_json(),
            "task_totals": self.task_totals.to_json(),
            "entries": [entry.to_json() for entry in self.entries],
        }

    def json_text(self) -> str:
        # ASCII only: a forge's or the model's text (an author, a path, a command in `detail`)
        # is escaped, so no control character of theirs reaches a terminal that shows it.
        return json.dumps(self.to_json(), ensure_ascii=True, indent=1)


def build_timeline(
    store: Store, key: TaskKey, run: int | None = None, price: Price | None = None
) -> Timeline:
    """The timeline of `key`'s run `run` (default: the current one), from the store only."""
    state = store.load(key)
    if state is None:
        raise TimelineError(f"no task {key} in {store.where}")
    if state.run < 1:  # not written by any version; a hand-made or damaged state
        raise TimelineError(f"task {key} has no run on record")
    run = state.run if run is None else run
    if not 1 <= run <= state.run:
        raise TimelineError(f"task {key} has runs 1 to {state.run}; there is no run {run}")
    current = run == state.run
    raw = store.conversation(key).entries() if current else store.archived_conversation(key, run)
    if not current and not raw:
        raise TimelineError(f"run {run} of task {key} is not kept (pruned, or never recorded)")
    entries = tuple(describe(raw, price))
    status: str | None
    step: int | None
    if current:
        status, reason, step, usage = state.status.value, state.reason, state.step, state.usage
    else:
        status, reason, step, usage = _archived(entries)
    times = [e.at for e in entries if e.at is not None]
    if current:
        times += [parse_time(state.created_at), parse_time(state.updated_at)]
    holder = store.holders().get(str(key)) if current else None
    return Timeline(
        key=str(key),
        run=run,
        runs=state.run,
        status=status,
        reason=reason,
        step=step,
        entries=entries,
        totals=totals(usage, price),
        task_totals=totals(state.earlier_usage.plus(state.usage), price),
        busy_seconds=round(sum(e.duration or 0.0 for e in entries), 3),
        started=next((e.at for e in entries if e.at is not None), min(times, default=None)),
        last_activity=max(times, default=None),
        holder=holder.daemon if holder is not None else None,
    )


def totals(usage: Usage, price: Price | None) -> Totals:
    cost = cost_of(usage, price) if price else None
    currency = price.currency if price else None
    return Totals(usage.calls, usage.prompt_tokens, usage.completion_tokens, cost, currency)


def _archived(entries: tuple[Entry, ...]) -> tuple[str | None, str | None, int | None, Usage]:
    """An archived run's end (its last status entry), steps and usage, from its entries: its
    state is the next run's now. It has ended whatever its entries say: a last entry that
    says running (its end lost in a crash before it was appended) tells no end (None)."""
    ends = [e.detail for e in entries if e.kind == "status" and e.detail.get("status")]
    last = ends[-1] if ends and ends[-1].get("status") != "running" else {}
    step = max((int(e.detail.get("step") or 0) for e in entries), default=0) or None
    return last.get("status"), last.get("reason"), step, _usage_of(entries)


def _usage_of(entries: Iterable[Entry]) -> Usage:
    usage = Usage()
    for entry in entries:
        usage.calls += int(entry.kind == "reply")
        usage.prompt_tokens += entry.prompt_tokens or 0
        usage.completion_tokens += entry.completion_tokens or 0
    return usage
