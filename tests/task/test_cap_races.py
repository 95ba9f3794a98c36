"""The cap's promises attacked with interleavings (issue 21, deliver 3; docs/architecture.md,
invariant 16): a reply of several tool calls at the cap, and a writer's `/bot resume` written
while the bot was about to ask. On both forges, the real clients against the emulator."""

from __future__ import annotations

import re
from typing import Any

from bot.model.state import Cap, Status
from bot.task.cap_note import CAP_HEADER
from bot_sandbox.forge_server import Fault, RecordedRequest
from bot_sandbox.llm_server import count_tool_results
from bot_sandbox.world import StepClock, SThread
from tests.rig import Rig
from tests.test_agent_e2e import call

BATCH = {
    "tool_calls": [
        ("post_comment", {"body": "first"}),
        ("post_comment", {"body": "second"}),
        ("read_file", {"path": "README.md"}),
    ]
}


def said(rig: Rig, thread: SThread) -> list[str]:
    """The bot's comments, each without its marker."""
    return [b.split("\n\n<!-- bot:")[0] for b in rig.bot_comments(thread)]


def tool_results(rig: Rig, thread: SThread) -> list[dict[str, Any]]:
    return [e for e in rig.conversation(thread) if e.get("role") == "tool"]


def comments_path(rig: Rig) -> str:
    return "/notes$" if rig.platform == "gitlab" else "/comments$"


def test_a_reply_at_the_cap_waits_whole_and_each_call_runs_once_after_the_resume(
    rig: Rig,
) -> None:
    rig.llm_options = ", max_steps: 2"
    thread = rig.issue()

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        done = count_tool_results(request)
        if done == 0:
            return call("read_file", path="src/app.py")
        if done == 1:
            return BATCH  # the second model call: the one that reaches the cap
        return call("finish", summary="Done.")

    rig.model.policy = policy
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.capped is Cap.STEPS
    assert len(tool_results(rig, thread)) == 1  # none of the three ran
    assert "first" not in said(rig, thread) and "second" not in said(rig, thread)

    rig.comment(thread, "/bot resume")
    rig.run_once()
    assert rig.state(thread).status is Status.DONE
    words = said(rig, thread)
    assert words.count("first") == 1 and words.count("second") == 1
    names = [e["name"] for e in tool_results(rig, thread)]
    assert names == ["read_file", "post_comment", "post_comment", "read_file", "finish"]
    assert count_tool_results(rig.model.requests[-1]) == 4  # the model saw the whole batch
    assert len(rig.model.requests) == 3


def test_a_resume_written_before_the_caps_comment_does_not_answer_it(rig: Rig) -> None:
    rig.forge.world.clock = StepClock()  # type: ignore[method-assign]  # each event its second
    rig.llm_options = ", max_steps: 2"
    thread = rig.issue()
    rig.model.policy = lambda _request: call("read_file", path="README.md")
    early: list[int] = []
    # Alice writes `/bot resume` as the bot is about to post its cap comment: after the check
    # that found the cap had read the comments, before the question was asked.
    rig.forge.add_fault(
        Fault(
            kind="hook",
            method="POST",
            path=comments_path(rig),
            action=lambda: early.append(rig.comment(thread, "/bot resume")),
        )
    )
    rig.run_once()
    state = rig.state(thread)
    assert early and state.status is Status.PAUSED and state.capped is Cap.STEPS
    capped = [b for b in rig.bot_comments(thread) if b.startswith(CAP_HEADER)]
    assert capped == rig.bot_comments(thread) and len(capped) == 1  # the hook met the ask
    assert state.asked_at is not None
    requests, results = len(rig.model.requests), len(tool_results(rig, thread))

    rig.run_once()  # the early resume is read now: no answer to a question not yet asked
    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.capped is Cap.STEPS
    assert state.allowance.steps is None
    assert (len(rig.model.requests), len(tool_results(rig, thread))) == (requests, results)

    rig.model.policy = lambda _request: call("finish", summary="Done.")
    rig.comment(thread, "/bot resume")  # written after the question: the answer
    rig.run_once()
    assert rig.state(thread).status is Status.DONE


def test_a_cap_met_in_the_middle_of_a_batch_runs_the_rest_once_after_the_resume(
    rig: Rig,
) -> None:
    """A run stopped after the first call of a reply's three; restarted with a lower
    `llm.max_steps` it is at its cap before the second: the rest waits, the first is not
    repeated, and after the resume the rest runs once."""
    rig.llm_options = ", max_steps: 5"
    thread = rig.issue()

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        done = count_tool_results(request)
        if done == 0:
            return call("read_file", path="src/app.py")
        if done == 1:
            return BATCH
        return call("finish", summary="Done.")

    def stop_after_the_first(record: RecordedRequest) -> None:
        if record.method == "POST" and re.search(comments_path(rig), record.path):
            rig.forge.before_response = None
            rig.stop.set()  # the daemon is told to stop: it halts before the next call

    rig.model.policy = policy
    rig.forge.before_response = stop_after_the_first
    rig.run_once()
    assert rig.state(thread).status is Status.RUNNING
    assert [e["name"] for e in tool_results(rig, thread)] == ["read_file", "post_comment"]

    rig.stop.clear()
    rig.llm_options = ", max_steps: 2"  # the operator lowers the cap; the task is at it
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.capped is Cap.STEPS
    assert len(tool_results(rig, thread)) == 2 and said(rig, thread).count("second") == 0

    rig.comment(thread, "/bot resume")
    rig.run_once()
    assert rig.state(thread).status is Status.DONE
    words = said(rig, thread)
    assert words.count("first") == 1 and words.count("second") == 1
    names = [e["name"] for e in tool_results(rig, thread)]
    assert names == ["read_file", "post_comment", "post_comment", "read_file", "finish"]
