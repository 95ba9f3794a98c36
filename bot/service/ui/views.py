"""What the pages show, as data read from the store: the task list (with its filters) and one
task's run (its timeline, plan, links, and the text of each entry).

The timeline is `build_timeline`'s (the same view as `bot show`). The text of an entry (what
the model was shown or said: the thread, comments, tool results, tool calls) is read beside
it from the same conversation, one text per entry in order, as the timeline has one entry
per conversation entry. Texts may quote anything the bot saw, internal notes included: the
page is for the people who run the bot (README, "The task page").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from bot.core.pricing import Price
from bot.model.state import PlanItem, Status, TaskState
from bot.model.thread import TaskKey
from bot.service.ui.links import ForgeLinks, href
from bot.store.base import Holder, Store
from bot.store.errors import Unreadable
from bot.task.allowance import cost_of
from bot.task.page_link import task_path
from bot.task.timeline import Entry, Timeline, build_timeline

TEXT_CHARS = 20_000  # of one entry's text; the rest is counted


@dataclass(frozen=True)
class Filters:
    """The list's query: a status, and a repository (`platform:owner/name`, or `owner/name`
    on every forge)."""

    status: str | None = None
    repo: str | None = None

    def keeps(self, state: TaskState, key: TaskKey) -> bool:
        if self.status and state.status.value != self.status:
            return False
        if self.repo:
            return self.repo in (f"{key.platform.value}:{key.repo}", key.repo)
        return True


@dataclass(frozen=True)
class TaskRow:
    key: str
    path: str
    status: str
    repository: str  # platform:owner/name
    thread_url: str | None
    holder: str | None
    run: int
    step: int
    tokens: int  # the task's, every run
    cost: Decimal | None  # the task's, every run
    last_activity: str


@dataclass(frozen=True)
class TaskList:
    rows: list[TaskRow]
    unreadable: list[Unreadable]
    statuses: list[str]
    repositories: list[str]  # every task's, for the filter
    currency: str | None

    @property
    def running(self) -> bool:
        return any(row.status == Status.RUNNING.value for row in self.rows)


def task_list(store: Store, price: Price | None, links: ForgeLinks, filters: Filters) -> TaskList:
    """Every task the store has (newest activity first), as `bot status` lists them."""
    states, unreadable = store.scan()
    holders = store.holders()
    repositories: set[str] = set()
    rows: list[TaskRow] = []
    for state in sorted(states, key=lambda s: s.updated_at, reverse=True):
        key = state.task_key()
        repositories.add(f"{key.platform.value}:{key.repo}")
        if filters.keeps(state, key):
            rows.append(_row(state, key, price, links, holders.get(state.key)))
    return TaskList(
        rows=rows,
        unreadable=unreadable,
        statuses=[s.value for s in Status],
        repositories=sorted(repositories),
        currency=price.currency if price else None,
    )


def _row(
    state: TaskState, key: TaskKey, price: Price | None, links: ForgeLinks, holder: Holder | None
) -> TaskRow:
    usage = state.earlier_usage.plus(state.usage)
    return TaskRow(
        key=state.key,
        path=task_path(key),
        status=state.status.value,
        repository=f"{key.platform.value}:{key.repo}",
        thread_url=links.thread(key),
        holder=holder.daemon if holder is not None else None,
        run=state.run,
        step=state.step,
        tokens=usage.total,
        cost=cost_of(usage, price) if price else None,
        last_activity=state.updated_at,
    )


@dataclass(frozen=True)
class Step:
    """One timeline entry and its text ("" when it has none)."""

    entry: Entry
    text: str


@dataclass(frozen=True)
class TaskPage:
    timeline: Timeline
    steps: list[Step]
    plan: list[PlanItem]
    thread_url: str | None
    request_url: str | None
    runs: list[tuple[int, str]]  # every run and its page

    @property
    def refresh(self) -> bool:
        """Whether the page reloads itself: only the current run of a running task."""
        return self.timeline.current and self.timeline.status == Status.RUNNING.value


def task_page(
    store: Store, key: TaskKey, run: int | None, price: Price | None, links: ForgeLinks
) -> TaskPage:
    """One run of a task (default: the current one); TimelineError when there is none."""
    timeline = build_timeline(store, key, run, price)
    raw = (
        store.conversation(key).entries()
        if timeline.current
        else store.archived_conversation(key, timeline.run)
    )
    texts = [entry_text(item) for item in raw]
    steps = [Step(entry, text) for entry, text in zip(timeline.entries, texts, strict=False)]
    state = store.load(key)
    path = task_path(key)
    return TaskPage(
        timeline=timeline,
        steps=steps,
        plan=list(state.plan) if state is not None and timeline.current else [],
        thread_url=links.thread(key),
        request_url=href(state.change_request_url) if state is not None else None,
        runs=[(n, f"{path}?run={n}") for n in range(1, timeline.runs + 1)],
    )


def entry_text(item: Mapping[str, Any]) -> str:
    """What a conversation entry says: its content, and a reply's tool calls with their
    arguments; cut at `TEXT_CHARS`."""
    parts: list[str] = []
    content = item.get("content")
    if isinstance(content, str) and content.strip():
        parts.append(content)
    for call in item.get("tool_calls") or []:
        function = (call.get("function") if isinstance(call, dict) else None) or {}
        parts.append(f"{function.get('name')}({_arguments(function.get('arguments'))})")
    text = "\n\n".join(parts)
    if len(text) > TEXT_CHARS:
        text = text[:TEXT_CHARS] + f"\n… ({len(text) - TEXT_CHARS:,} more characters)"
    return text


def _arguments(arguments: Any) -> str:
    if not isinstance(arguments, str):
        return ""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    return json.dumps(parsed, ensure_ascii=False, indent=1)
