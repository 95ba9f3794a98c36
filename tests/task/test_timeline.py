"""The timeline as a view over the store, on both backends: entries written before they carried
times and usage, every event kind, an archived run, and text that must not reach a terminal."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from bot.core.clock import FakeClock
from bot.core.pricing import Price
from bot.model.state import Status, Usage
from bot.service.show import Painter, render
from bot.store.base import Store
from bot.task.record import Events, Stamped
from bot.task.timeline import TimelineError, build_timeline
from tests.store.helpers import KEY, file_store, migrated, pg_store, state

PRICE = Price(input_per_million=Decimal("3"), output_per_million=Decimal("15"), currency="USD")
LEGACY = [  # what a run recorded before entries had times, usage and authors
    {"role": "system", "content": "You are the bot.", "kind": "system"},
    {
        "role": "user",
        "content": "Fix it.",
        "kind": "initial",
        "comments": [{"id": "7", "updated_at": "2025-01-01T00:00:00Z"}],
    },
    {
        "role": "assistant",
        "content": None,
        "kind": "reply",
        "step": 1,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "1| x", "kind": "tool", "name": "read_file"},
]


@pytest.fixture(params=["files", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened: Store
    if request.param == "files":
        opened = file_store(tmp_path / "state")
    else:
        opened = pg_store(migrated(request.getfixturevalue("pg_dsn")))
    yield opened
    opened.close()


def test_entries_from_before_still_show_without_time_or_tokens(store: Store) -> None:
    usage = Usage(calls=1, prompt_tokens=1200, completion_tokens=30)
    store.save(state(step=1, usage=usage))
    log = store.conversation(KEY)
    for entry in LEGACY:
        log.append(entry)
    timeline = build_timeline(store, KEY, price=PRICE)
    assert [e.kind for e in timeline.entries] == ["system", "initial", "reply", "tool"]
    assert all(e.at is None and e.prompt_tokens is None for e in timeline.entries)
    assert timeline.entries[2].summary == "calls read_file a.py"
    assert timeline.entries[3].summary == "read_file a.py: done"
    assert timeline.entries[1].detail["comments"] == [{"id": "7", "author": None, "internal": None}]
    # The run's totals are the state's usage (what the caps count), priced exactly.
    assert timeline.totals.tokens == 1230
    assert timeline.totals.cost == Decimal("0.00405")
    text = render(timeline, Painter(False))
    assert "--:--:--  reply       model" in text
    assert "run 1: 1 model call, 1,230 tokens (1,200 prompt, 30 completion), 0.0041 USD" in text


def test_every_event_kind_is_described_and_stamped_on_the_injected_clock(store: Store) -> None:
    clock = FakeClock(datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC), step=1)
    store.save(state(status=Status.DONE, reason=None))
    log = Stamped(store.conversation(KEY), clock)
    events = Events(log)
    events.status(Status.RUNNING, "started")
    events.error("model", "the endpoint did not answer")
    events.checks(None)
    events.posted("done", 3, "issue:99")
    events.status(Status.DONE)
    timeline = build_timeline(store, KEY)
    assert [(e.kind, e.actor, e.summary) for e in timeline.entries] == [
        ("status", "bot", "started"),
        ("error", "model", "error: the endpoint did not answer"),
        ("checks_run", "checks", "checks not run (running commands is not enabled)"),
        ("posted", "bot", "posted the final comment (issue:99)"),
        ("status", "bot", "done"),
    ]
    assert [e.at for e in timeline.entries] == [
        datetime(2025, 3, 4, 5, 6, 7 + n, tzinfo=UTC) for n in range(5)
    ]
    assert timeline.started == datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert timeline.totals.cost is None and timeline.totals.currency is None  # no price


def test_an_archived_run_tells_its_own_end_and_tokens(store: Store) -> None:
    store.save(state(status=Status.DONE))
    log = store.conversation(KEY)
    for entry in [
        {"role": "assistant", "content": "All done.", "kind": "reply", "step": 1,
         "usage": {"prompt_tokens": 1000, "completion_tokens": 100}, "duration": 2.5},
        {"role": "event", "kind": "status", "status": "done", "reason": None},
    ]:  # fmt: skip
        log.append(entry)
    store.archive_run(KEY, 1)
    store.save(
        state(run=2, earlier_usage=Usage(calls=1, prompt_tokens=1000, completion_tokens=100))
    )
    old = build_timeline(store, KEY, run=1, price=PRICE)
    assert (old.run, old.runs, old.status, old.step) == (1, 2, "done", 1)
    assert old.totals.tokens == 1100 and old.totals.cost == Decimal("0.0045")
    assert old.entries[0].summary == "answers: All done." and old.entries[0].duration == 2.5
    assert old.holder is None and old.busy_seconds == 2.5
    current = build_timeline(store, KEY, price=PRICE)
    assert current.run == 2 and current.task_totals.tokens == 1100
    with pytest.raises(TimelineError, match="there is no run 3"):
        build_timeline(store, KEY, run=3)
    with pytest.raises(TimelineError, match="no task github:acme/app#2"):
        build_timeline(store, KEY.__class__.parse("github:acme/app#2"))


HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202eevil\u202c\r\nline two"


def test_nothing_from_a_forge_or_the_model_drives_the_terminal(store: Store) -> None:
    store.save(state())
    log = store.conversation(KEY)
    ref = {"id": "9", "updated_at": "2025-01-01T00:00:00Z", "author": f"mallory{HOSTILE}"}
    log.append({"role": "user", "content": "hi", "kind": "comments", "comments": [ref]})
    log.append({"role": "assistant", "content": f"Answer {HOSTILE}", "kind": "reply"})
    text = render(build_timeline(store, KEY), Painter(False))
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text and "\r" not in text
    assert "answers: Answer ]0;owned [2J evil line two" in text
    coloured = render(build_timeline(store, KEY), Painter(True))
    escapes = {part.split("m")[0] for part in coloured.split("\x1b[")[1:]}
    assert escapes <= {"0", "2", "32", "35", "36"}  # only our own colours
