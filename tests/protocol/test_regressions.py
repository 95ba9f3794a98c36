"""Reproductions from issue 10 (items 1-3), each a plain test: comments followed by commands,
a paused task that kept acting, and threads closed, merged or deleted under a running task."""

from __future__ import annotations

import re
from typing import Any

import pytest
from structlog.testing import capture_logs

from bot.model.state import Status
from bot_sandbox.llm_server import count_tool_results
from bot_sandbox.world import StepClock
from tests.conftest import REPO
from tests.rig import Rig, comment_id

DONE, PROCESSING, PAUSED = "coding agent done", "coding agent processing", "coding agent paused"
STOPPED = "coding agent stopped"


def notes(*bodies: str) -> dict[str, Any]:
    return {"tool_calls": [("post_comment", {"body": b}) for b in bodies]}


def finish(summary: str = "All done.") -> dict[str, Any]:
    return {"tool_calls": [("finish", {"summary": summary})]}


def bot_notes(rig: Rig, thread: Any) -> list[str]:
    """The notes the model posted through its tool (first lines, markers left out)."""
    return [b.split("\n")[0] for b in rig.bot_comments(thread) if b.startswith("note")]


def thread_requests(rig: Rig, thread: Any, since: int) -> list[tuple[str, str]]:
    """(method, path) of the forge requests about `thread` after the first `since` ones."""
    pattern = re.compile(rf"/(issues|pulls|merge_requests)/{thread.number}(/|$)")
    return [(r.method, r.path) for r in rig.forge.requests[since:] if pattern.search(r.path)]


@pytest.fixture(params=["step", "same-second"])
def clock(request: pytest.FixtureRequest, rig: Rig) -> str:
    """Each event in its own second, or (the emulator's default clock) many in one."""
    if request.param == "step":
        rig.forge.world.clock = StepClock()  # type: ignore[method-assign]
    return str(request.param)


# -- 1. a comment followed by a command is lost -------------------------------------------------


def test_comment_then_harmless_command_between_tool_calls_still_arrives(
    rig: Rig, clock: str
) -> None:
    thread = rig.issue()

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        if len(rig.model.requests) == 1:
            rig.comment(thread, "Please also update the CHANGELOG.")
            rig.comment(thread, "/bot resume")  # harmless while running
            return notes("note one", "note two")
        return finish()

    rig.model.policy = policy
    rig.run_once()
    assert "Please also update the CHANGELOG." in rig.model.seen_text()
    assert rig.state(thread).status is Status.DONE


def test_comment_then_pause_then_resume_next_cycle_still_arrives(rig: Rig, clock: str) -> None:
    thread = rig.issue()

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        if len(rig.model.requests) == 1:
            rig.comment(thread, "use approach B")
            rig.comment(thread, "/bot pause")
            return notes("note one")
        return finish()

    rig.model.policy = policy
    rig.run_once()
    assert rig.state(thread).status is Status.PAUSED
    rig.comment(thread, "/bot resume")
    rig.run_once()
    assert "use approach B" in str(rig.model.requests[-1]["messages"])
    assert rig.state(thread).status is Status.DONE


def test_pause_with_text_then_label_resume_is_not_paused_again(rig: Rig, clock: str) -> None:
    """The command of a `/bot pause` with more text is obeyed once, though its text waited."""
    thread = rig.issue()

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        if len(rig.model.requests) == 1:
            rig.comment(thread, "/bot pause\nI will write the design doc first.")
            return notes("note one")
        return finish()

    rig.model.policy = policy
    rig.run_once()
    assert thread.labels == [PAUSED]
    rig.set_labels(thread, [])  # a writer removes the paused label: resume
    rig.run_once()
    assert rig.state(thread).status is Status.DONE
    assert "I will write the design doc first." in str(rig.model.requests[-1]["messages"])


# -- 2. a paused task keeps acting ------------------------------------------------------------


def test_paused_task_runs_no_pending_tool_call_and_costs_one_check_per_cycle(
    rig: Rig, clock: str
) -> None:
    thread = rig.issue()

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        if count_tool_results(req) == 0:
            rig.comment(thread, "/bot pause")
            return notes("note one", "note two")
        return finish()

    rig.model.policy = policy
    rig.run_once()
    assert rig.state(thread).status is Status.PAUSED
    assert bot_notes(rig, thread) == []  # the pause came before the first tool call ran
    for _ in range(3):
        before = len(rig.forge.requests)
        rig.run_once()
        assert bot_notes(rig, thread) == []
        assert len(rig.model.requests) == 1
        task = thread_requests(rig, thread, before)
        # the cheap control check: the thread and its comments, nothing else of the task
        assert all(method == "GET" for method, _ in task), task
        assert len(task) <= 3, task
    rig.comment(thread, "/bot resume")
    rig.run_once()
    assert bot_notes(rig, thread) == ["note one", "note two"]
    assert rig.state(thread).status is Status.DONE


# -- 3. closing does not stop it ----------------------------------------------------------------


@pytest.mark.parametrize("change_request", [False, True], ids=["issue", "change-request"])
def test_closing_the_thread_mid_run_ends_the_task_without_publishing(
    rig: Rig, change_request: bool
) -> None:
    kind = "issue" if not change_request else ("pull" if rig.platform == "github" else "mr")
    thread = rig.issue(kind=kind)
    # A merged PR is a closed issue on GitHub; GitLab has its own `merged` state.
    ending = "merged" if change_request and rig.platform == "gitlab" else "closed"

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        if count_tool_results(req) == 0:
            rig.forge.world.set_state(rig.platform, REPO, thread.number, ending, kind=kind)
            edit = {"path": "src/app.py", "old": "'hi'", "new": "'hello'"}
            return {"tool_calls": [("edit_file", edit)]}
        return finish("Changed the greeting.")

    rig.model.policy = policy
    commits = len(rig.forge.world.repo(rig.platform, REPO).commits)
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.STOPPED and state.reason == "closed"
    assert len(rig.forge.world.repo(rig.platform, REPO).commits) == commits  # nothing committed
    assert not [t for t in rig.forge.world.all_threads() if t.change is not None]  # no PR/MR
    assert PROCESSING not in thread.labels and thread.labels == [STOPPED]
    assert rig.bot_comments(thread) == []  # nothing had been published: nothing to say
    assert len(rig.model.requests) == 1


def test_closing_after_a_note_says_so_once_and_reopening_starts_a_new_run(rig: Rig) -> None:
    thread = rig.issue()

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        if count_tool_results(req) == 0:
            return notes("note one")
        rig.forge.world.set_state(rig.platform, REPO, thread.number, "closed", kind="issue")
        return finish("Done before anyone noticed.")

    rig.model.policy = policy
    rig.run_once()
    rig.run_once()
    closing = [b for b in rig.bot_comments(thread) if "closed" in b]
    assert len(closing) == 1 and len(rig.bot_comments(thread)) == 2
    assert rig.state(thread).reason == "closed"
    assert not any("Done before" in b for b in rig.bot_comments(thread))

    rig.forge.world.set_state(rig.platform, REPO, thread.number, "open", kind="issue")
    rig.set_labels(thread, [*thread.labels, "coding agent"])
    rig.model.policy = lambda req: finish("Second run.")
    rig.run_once()
    assert rig.state(thread).run == 2 and rig.state(thread).status is Status.DONE
    assert thread.labels == [DONE]


def test_deleted_thread_ends_the_task_instead_of_retrying(rig: Rig) -> None:
    thread = rig.issue()

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        rig.forge.world.delete_thread(rig.platform, REPO, thread.number, "issue")
        return notes("note one")

    rig.model.policy = policy
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.STOPPED and state.reason == "deleted"
    before = len(rig.forge.requests)
    rig.run_once()
    assert thread_requests(rig, thread, before) == []  # not retried
    assert len(rig.model.requests) == 1


def test_task_of_a_repository_no_longer_configured_is_left_alone(rig: Rig) -> None:
    rig.forge.world.add_repo(rig.platform, "acme/other", files={"README.md": "# other\n"})
    thread = rig.issue()

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        rig.stop.set()  # the daemon stops mid-task: the task stays running on disk
        return notes("note one")

    rig.model.policy = policy
    rig.run_once()
    assert rig.state(thread).status is Status.RUNNING
    rig.stop.clear()
    rig.repos = "acme/other"
    before = len(rig.forge.requests)
    daemon = rig.daemon()
    try:
        with capture_logs() as logs:
            daemon.run_once()
            daemon.run_once()
    finally:
        daemon.close()
    left = [e for e in logs if e["event"] == "task_left_alone"]
    assert len(left) == 1 and left[0]["task"] == str(rig.key(thread))
    assert thread_requests(rig, thread, before) == []
    assert len(rig.model.requests) == 1
    assert rig.state(thread).status is Status.RUNNING


# -- counterexamples the state machine shrank to (against the code before the fix) ------------


def _cut_first_turn(rig: Rig) -> Any:
    """Start a task and stop the daemon during its first model call (a cut turn)."""
    thread = rig.issue()

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        if len(rig.model.requests) == 1:
            rig.stop.set()
            return notes("note-idle")
        return finish()

    rig.model.policy = policy
    rig.run_once()
    rig.stop.clear()
    return thread


def test_untrusted_command_then_writers_pause_keeps_the_untrusted_text(
    rig: Rig, clock: str
) -> None:
    """Machine: poll (cut), `/bot pause` by bob (read access), `/bot pause` by alice, poll."""
    thread = _cut_first_turn(rig)
    bob = rig.comment(thread, "/bot pause", author="bob")
    rig.comment(thread, "/bot pause")
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.PAUSED
    bob_id = comment_id(rig.platform, bob)
    assert bob_id not in state.seen and bob_id not in rig.delivered_ids(thread)
    assert state.comments_since is not None
    rig.comment(thread, "/bot resume")
    rig.run_once()
    assert rig.delivered_ids(thread).count(bob_id) == 1
    assert "> /bot pause" in rig.model.seen_text()  # bob's text, quoted as untrusted data


def test_close_during_the_first_model_call_posts_nothing(rig: Rig, clock: str) -> None:
    """Machine: `/bot pause` by alice before the task started (history), then a close while
    the model thinks: the reply's note must not be posted on the closed thread."""
    thread = rig.issue()
    rig.comment(thread, "/bot pause")

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        rig.forge.world.set_state(rig.platform, REPO, thread.number, "closed", kind="issue")
        return notes("note-1")

    rig.model.policy = policy
    rig.run_once()
    assert bot_notes(rig, thread) == []
    assert rig.state(thread).reason == "closed"


def test_paused_label_after_a_resume_command_pauses_before_the_next_tool_call(
    rig: Rig, clock: str
) -> None:
    """Machine: while the model thinks, alice comments `/bot resume` (harmless: it runs) and
    then adds the paused label. The label is the newer control: the reply's note waits."""
    thread = rig.issue()

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        if len(rig.model.requests) == 1:
            rig.comment(thread, "/bot resume")
            rig.set_labels(thread, [*thread.labels, PAUSED])
            return notes("note-1")
        return finish()

    rig.model.policy = policy
    rig.run_once()
    assert bot_notes(rig, thread) == []
    assert rig.state(thread).status is Status.PAUSED
