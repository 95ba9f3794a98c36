"""A cap asks, it does not destroy (docs/architecture.md, invariant 16; issue 21, deliver 3).

A run that reaches `llm.max_cost_per_task`, `llm.max_tokens_per_task` or `llm.max_steps` is
paused at the next safe point with one comment; a writer's `/bot resume` (`2x`, or an amount)
continues with the allowance again, counted from what was used at the resume. On both forges,
with the real clients against the emulator and the scripted model over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from bot.core.config import ConfigError, LLMSettings, parse_settings
from bot.core.pricing import Price
from bot.forge.mentions import starts_bot
from bot.model.grant import Grant
from bot.model.state import Cap, PlanItem, Status, TaskState, Usage
from bot.task.allowance import cost_of, limits, reached, renew
from bot.task.cap_note import CAP_HEADER, cap_note
from bot.task.controls import Command, parse_control, refused_grant
from bot.task.lifecycle import PAUSED_NOTE
from bot.task.timeline import build_timeline
from bot_sandbox.llm_server import count_tool_results
from tests.conftest import REPO
from tests.rig import Rig
from tests.store.helpers import migrated
from tests.test_agent_e2e import call

PAUSED, DONE = "coding agent paused", "coding agent done"
PRICE = "price: {input_per_million: 1000, output_per_million: 1000, currency: USD}"


class Working:
    """A model that plans, writes a file, then keeps reading until told to finish."""

    def __init__(self) -> None:
        self.finishing = False

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        done = count_tool_results(request)
        if done == 0:
            items = [{"text": "Read the greeting", "done": True}, {"text": "Say hello"}]
            return call("update_plan", items=items)
        if done == 1:
            return call("write_file", path="src/app.py", content="print('hello')\n")
        if self.finishing:
            return call("finish", summary="src/app.py prints hello.")
        return call("read_file", path="README.md")


def tool_results(rig: Rig, thread: Any) -> int:
    return sum(1 for e in rig.conversation(thread) if e.get("role") == "tool")


def cap_comments(rig: Rig, thread: Any) -> list[str]:
    return [b for b in rig.bot_comments(thread) if b.startswith(CAP_HEADER)]


def pending_after_last_reply(rig: Rig, thread: Any) -> int:
    """Tool calls of the newest model reply without a result in the conversation."""
    entries = rig.conversation(thread)
    last = max(i for i, e in enumerate(entries) if e.get("role") == "assistant")
    answered = {e.get("tool_call_id") for e in entries[last + 1 :] if e.get("role") == "tool"}
    return sum(1 for c in entries[last].get("tool_calls") or [] if c["id"] not in answered)


@pytest.fixture(params=["files", "postgres"])
def stored(rig: Rig, request: pytest.FixtureRequest) -> Iterator[Rig]:
    """The rig with its state in files, or in PostgreSQL (a fresh migrated database)."""
    if request.param == "postgres":
        dsn = migrated(request.getfixturevalue("pg_dsn"))
        rig.extra_config = f"store: {{backend: postgres, dsn: '{dsn}'}}"
        assert rig.store().shared  # the test really reads PostgreSQL
    yield rig
    rig.close()


def test_a_task_at_its_cost_cap_pauses_once_and_resumes_with_bot_resume_to_done(
    stored: Rig,
) -> None:
    rig = stored  # every `run_once` is a new daemon: a restart, with only the store to go on
    rig.llm_options = f", max_cost_per_task: 1.2, {PRICE}"
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    model = Working()
    rig.model.policy = model
    rig.run_once()

    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.capped is Cap.COST
    assert thread.labels == [PAUSED]
    settings = rig.settings.llm
    assert settings.price is not None
    assert cost_of(state.usage, settings.price) >= Decimal("1.2")
    # Paused at the safe point right after the call that reached the cap: its tool call waits.
    assert pending_after_last_reply(rig, thread) == 1
    said = cap_comments(rig, thread)
    assert len(said) == 1
    note = said[0]
    assert "cost cap (`llm.max_cost_per_task`)" in note and " USD" in note
    assert "- [x] Read the greeting" in note and "- [ ] Say hello" in note
    assert "`src/app.py`" in note and "`/bot resume`" in note
    # The timeline (bot show, the task page) says why it paused.
    kinds = [
        (e.kind, e.summary)
        for e in build_timeline(rig.store(), rig.key(thread), price=settings.price).entries
    ]
    assert any(k == "status" and "cost cap reached" in summary for k, summary in kinds)
    requests, results = len(rig.model.requests), tool_results(rig, thread)
    forge_log = len(rig.forge.requests)

    rig.run_once()  # a poll while paused: one check, nothing said again, nothing run
    rig.comment(thread, "/bot resume", author="bob")  # read access: refused as every control
    rig.run_once()
    assert rig.state(thread).status is Status.PAUSED
    assert (len(rig.model.requests), tool_results(rig, thread)) == (requests, results)
    assert len(cap_comments(rig, thread)) == 1
    writes = [(r.method, r.path) for r in rig.forge.requests[forge_log:] if r.method != "GET"]
    assert writes == []  # no comment, label, branch or commit while it waits

    model.finishing = True
    rig.comment(thread, "/bot resume")  # alice, a writer
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.DONE and thread.labels == [DONE]
    assert tool_results(rig, thread) == results + 2  # the waiting call, then `finish`
    assert len(rig.model.requests) == requests + 1
    assert state.allowance.cost is not None and state.allowance.cost > Decimal("1.2")
    assert len(cap_comments(rig, thread)) == 1
    # Nothing was thrown away: the file written before the cap is in the change request.
    repo = rig.forge.world.repo(rig.platform, REPO)
    assert state.branch is not None
    files = repo.files(state.branch)
    assert files is not None and files["src/app.py"] == b"print('hello')\n"


def test_bot_resume_2x_grants_twice_the_steps_and_the_label_grants_them_again(rig: Rig) -> None:
    rig.llm_options = ", max_steps: 2"
    thread = rig.issue()
    rig.model.policy = lambda req: call("post_comment", body=f"note {count_tool_results(req)}")
    rig.run_once()
    assert rig.state(thread).step == 2 and len(rig.model.requests) == 2

    rig.comment(thread, "/bot resume 2x")
    rig.run_once()  # 4 more model calls, then paused again: a second cap, a second comment
    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.step == 6
    assert state.allowance.steps == 6 and len(rig.model.requests) == 6
    assert any("with 4 model calls" in b for b in rig.bot_comments(thread))
    assert len(cap_comments(rig, thread)) == 2

    rig.set_labels(thread, [])  # alice takes the paused label off: the same allowance again
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.step == 8 and state.allowance.steps == 8
    assert len(cap_comments(rig, thread)) == 3


@pytest.mark.parametrize(
    ("text", "grant"),
    [
        ("/bot resume", Grant()),
        ("/BOT Resume 2x", Grant(times=Decimal(2))),
        ("/bot resume 1.5x", Grant(times=Decimal("1.5"))),
        ("/bot resume +200k tokens", Grant(tokens=200_000)),
        ("/bot resume 1m tokens", Grant(tokens=1_000_000)),
        ("/bot resume +10 steps", Grant(steps=10)),
        ("/bot resume +$5", Grant(cost=Decimal(5), currency="USD")),
        ("/bot resume +2.50 eur", Grant(cost=Decimal("2.50"), currency="EUR")),
    ],
)
def test_the_resume_grammar(text: str, grant: Grant) -> None:
    assert parse_control(text) == (Command.RESUME, grant)
    assert starts_bot(text)  # discovery hears the same grammar


@pytest.mark.parametrize(
    "text", ["/bot resume more", "/bot resume 0x", "/bot resume 101x", "/bot pause 2x", "/bot 2x"]
)
def test_anything_else_after_resume_is_no_command(text: str) -> None:
    assert parse_control(text) is None
    assert not starts_bot(text)


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("/bot resume more", "more"),
        ("/bot resume 101x", "101x"),
        ("\n  /bot resume +5 kg  \nplease", "+5 kg"),
        ("/bot resume 2x", None),  # a grant
        ("/bot resume", None),
        ("/bot pause 2x", None),  # not a resume: talk, as before
        ("thanks\n/bot resume lots", None),  # not the first line
    ],
)
def test_a_resume_that_grants_nothing_is_recognised_to_be_answered(
    text: str, word: str | None
) -> None:
    assert refused_grant(text) == word


LLM = LLMSettings(
    max_steps=10,
    max_tokens_per_task=10_000,
    max_cost_per_task=Decimal(1),
    price=Price(input_per_million=Decimal(100), output_per_million=Decimal(200)),
)


def test_the_allowance_counts_from_what_was_used_at_the_resume() -> None:
    state = TaskState(key="github:acme/app#1", step=10)
    state.usage = Usage(calls=10, prompt_tokens=4_000, completion_tokens=1_000)
    assert reached(state, LLM) is Cap.STEPS
    renewal = renew(state, LLM, Grant(times=Decimal(2)))
    cost = cost_of(state.usage, LLM.price)  # type: ignore[arg-type]
    assert (renewal.allowance.steps, renewal.allowance.tokens) == (30, 25_000)
    assert renewal.allowance.cost == cost + 2
    state.allowance = renewal.allowance
    assert reached(state, LLM) is None
    more = renew(state, LLM, Grant(cost=Decimal(5), currency="EUR"))
    assert more.refused is not None and "USD" in more.refused
    assert more.allowance.cost == cost + 1


def test_the_cap_comment_says_what_was_spent_done_and_left() -> None:
    state = TaskState(key="github:acme/app#1", step=4)
    state.usage = Usage(calls=4, prompt_tokens=9_000, completion_tokens=1_500)
    state.plan = [PlanItem(text="Find it", done=True), PlanItem(text="Fix it")]
    state.changes = {"a.py": "x", "old.py": None}
    note = cap_note(state, LLM, Cap.TOKENS)
    assert note.startswith(CAP_HEADER + "token cap (`llm.max_tokens_per_task`)")
    assert (
        "- tokens: 10,500 (allowed: 10,000)" in note
        and "- cost: 1.2000 USD (allowed: 1.0000 USD)" in note
    )
    assert "- [x] Find it" in note and "- [ ] Fix it" in note
    assert "`a.py`, `old.py` (deleted)" in note
    assert limits(state, LLM).cost == Decimal(1)


def test_a_cost_cap_without_a_price_is_a_config_error() -> None:
    text = f"github: {{token: x, repositories: [{REPO}]}}\nllm: {{max_cost_per_task: 5}}\n"
    with pytest.raises(ConfigError, match=r"^llm\.max_cost_per_task: .*llm\.price"):
        parse_settings(text, {})


class Noting:
    """A model that posts a note every turn, until told to finish."""

    def __init__(self) -> None:
        self.finishing = False

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.finishing:
            return call("finish", summary="Done.")
        return call("post_comment", body=f"note {count_tool_results(request)}")


def test_only_a_writers_resume_renews_and_what_cannot_be_granted_is_answered(rig: Rig) -> None:
    rig.llm_options = ", max_steps: 2"
    thread = rig.issue()
    model = Noting()
    rig.model.policy = model
    rig.run_once()
    assert rig.state(thread).capped is Cap.STEPS
    said, requests = len(rig.bot_comments(thread)), len(rig.model.requests)

    rig.comment(thread, "/bot resume 2x", author="bob")  # read access: as every control
    rig.run_once()
    assert rig.state(thread).status is Status.PAUSED and rig.state(thread).allowance.steps is None
    assert (len(rig.bot_comments(thread)), len(rig.model.requests)) == (said, requests)

    rig.comment(thread, "/bot resume lots")  # alice, a writer: answered, once, for both
    rig.comment(thread, "/bot resume 101x")
    rig.run_once()
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.allowance.steps is None
    answers = rig.bot_comments(thread)[said:]
    assert len(answers) == 1 and len(rig.model.requests) == requests
    assert answers[0].startswith("I cannot grant `lots`, `101x`")
    assert "up to 100x" in answers[0] and "`/bot resume +10 steps`" in answers[0]

    model.finishing = True
    rig.comment(thread, "/bot resume 100x")  # the most a factor grants
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.DONE and state.allowance.steps == 2 + 200
    assert any(
        b.startswith("Resumed where I left off, with 200 model calls")
        for b in rig.bot_comments(thread)
    )
    assert "lots" not in rig.model.seen_text()  # said to the bot, not to the model


def test_a_pause_at_the_same_check_as_the_cap_is_one_pause_with_the_caps_comment(
    rig: Rig,
) -> None:
    rig.llm_options = ", max_steps: 2"
    thread = rig.issue()

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        if count_tool_results(request) == 1 and PAUSED not in thread.labels:
            rig.set_labels(thread, [*thread.labels, PAUSED])  # alice pauses as the cap comes
        return call("post_comment", body=f"note {count_tool_results(request)}")

    rig.model.policy = policy
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.capped is Cap.STEPS
    assert len(cap_comments(rig, thread)) == 1
    assert PAUSED_NOTE not in rig.bot_comments(thread)  # one pause, said once
    assert thread.labels == [PAUSED]

    rig.set_labels(thread, [])  # alice takes it off: the allowance again, as `/bot resume`
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.step == 4 and state.allowance.steps == 4


def test_a_restart_after_the_resume_keeps_the_renewed_allowance(rig: Rig) -> None:
    rig.llm_options = ", max_steps: 2"
    thread = rig.issue()
    rig.model.policy = Noting()
    rig.run_once()
    rig.comment(thread, "/bot resume 2x")

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        if len(rig.model.requests) == 4:
            rig.stop.set()  # the daemon stops mid-run: the next one has the store only
        return call("post_comment", body=f"note {count_tool_results(request)}")

    rig.model.policy = policy
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.RUNNING and state.allowance.steps == 6 and state.step < 6
    rig.stop.clear()
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.step == 6 and state.allowance.steps == 6
    assert len(cap_comments(rig, thread)) == 2
