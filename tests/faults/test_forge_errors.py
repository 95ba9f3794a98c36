"""Issue 10, reproduction 5: permanent forge errors end the task `failed` with one comment that
says what a person can do; transient ones back off with a persisted, capped attempt count;
a rejected token stops the cycle without touching tasks. Real daemon, real clients, emulator.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import structlog

from bot.forge.errors import Forbidden, ForgeError, RateLimited, TransientError
from bot.model.state import Status
from bot.service.health import check
from bot.store.task_files import StateStore
from bot.task.failures import PERMANENT_ATTEMPTS, TRANSIENT_ATTEMPTS, Kind, backoff, classify
from bot_sandbox.forge_server import Fault, ForgeServer
from bot_sandbox.llm_server import LLMServer, count_tool_results, demo_policy, stepping_policy
from tests.conftest import REPO
from tests.processes import run_bot, write_config
from tests.rig import Rig

FAILED, DONE = "coding agent failed", "coding agent done"
GREET = {"demo/greet.py": 'def greet(name):\n    return "Hello " + name\n'}


def _demo(rig: Rig) -> Any:
    rig.forge.world.push(rig.platform, REPO, "main", GREET, "demo")
    rig.model.policy = demo_policy()
    return rig.issue(title="Greeting", body="fix demo/greet.py")


def _events(logs: list[dict[str, Any]]) -> list[str]:
    return [str(e["event"]) for e in logs]


def _run_until_settled(rig: Rig, cycles: int) -> list[dict[str, Any]]:
    with structlog.testing.capture_logs() as logs:
        for _ in range(cycles):
            rig.run_once()
    return logs


def _failure_comments(rig: Rig, thread: Any) -> list[str]:
    return [b for b in rig.bot_comments(thread) if b.startswith("I could not finish")]


@pytest.mark.parametrize("platform", ["github"])  # GitLab has drafts on every plan
def test_draft_pull_requests_unsupported_fails_once_and_says_what_to_do(rig: Rig) -> None:
    rig.forge.world.repo("github", REPO).drafts_supported = False
    thread = _demo(rig)
    logs = _run_until_settled(rig, 4)
    assert rig.state(thread).status is Status.FAILED
    assert thread.labels == [FAILED]
    comments = _failure_comments(rig, thread)
    assert len(comments) == 1
    assert "opening the pull request failed" in comments[0]
    assert "Draft pull requests are not supported" in comments[0]
    assert "`agent.draft_change_requests: false`" in comments[0]
    assert rig.forge.count("github", "POST", r"/pulls$") == PERMANENT_ATTEMPTS
    assert "forge_drafts_unsupported" in _events(logs)


@pytest.mark.parametrize("platform", ["github"])
def test_the_option_opens_an_ordinary_pull_request(rig: Rig) -> None:
    rig.forge.world.repo("github", REPO).drafts_supported = False
    rig.extra_config = "agent: {draft_change_requests: false}"
    thread = _demo(rig)
    rig.run_once()
    assert thread.labels == [DONE]
    pulls = [t for t in rig.forge.world.repo("github", REPO).threads.values() if t.change]
    assert len(pulls) == 1 and pulls[0].change is not None and not pulls[0].change.draft
    assert "\n\nChange request: " in rig.bot_comments(thread)[-1]


def test_archived_repository_fails_names_it_and_stops_trying(rig: Rig) -> None:
    thread = rig.issue()

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        rig.forge.world.repo(rig.platform, REPO).archived = True  # archived mid-run
        return {"tool_calls": [("post_comment", {"body": "a note"})]}

    rig.model.policy = policy
    logs = _run_until_settled(rig, 4)
    state = rig.state(thread)
    assert state.status is Status.FAILED
    assert "forge_auth_failed" not in _events(logs)
    expected = "forge_repository_archived" if rig.platform == "github" else "forge_forbidden"
    assert expected in _events(logs)
    # Nothing can be written to an archived repository, the failure comment neither: the
    # bot gives up on it instead of posting it every poll.
    assert "task_closing_abandoned" in _events(logs)
    rig.forge.clear_log()
    rig.run_once()
    writes = [r for r in rig.forge.requests if r.method != "GET" and r.platform == rig.platform]
    assert writes == []
    assert len(rig.model.requests) == 1


def test_protected_branch_fails_with_one_comment(rig: Rig) -> None:
    rig.forge.world.repo(rig.platform, REPO).protected = ["bot/*"]
    thread = _demo(rig)
    logs = _run_until_settled(rig, 4)
    assert rig.state(thread).status is Status.FAILED
    assert thread.labels == [FAILED]
    comments = _failure_comments(rig, thread)
    assert len(comments) == 1 and "protected" in comments[0]
    assert "forge_branch_protected" in _events(logs)
    assert "forge_auth_failed" not in _events(logs)


def test_deleted_progress_comment_is_posted_anew(rig: Rig) -> None:
    thread = rig.issue()
    world = rig.forge.world

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        done = count_tool_results(request)
        if done == 1:  # someone deletes the progress comment
            progress = next(c for c in thread.comments if "Working on it" in c.body)
            world.delete_comment(progress.id)
        if done < 2:
            items = [{"text": "step", "done": done == 1}]
            return {"tool_calls": [("update_plan", {"items": items})]}
        return {"tool_calls": [("finish", {"summary": "done"})]}

    rig.model.policy = policy
    for _ in range(3):
        rig.run_once()
    assert rig.state(thread).status is Status.DONE
    progress = [b for b in rig.bot_comments(thread) if "Working on it" in b]
    assert len(progress) == 1 and "- [x] step" in progress[0]


def test_empty_repository_fails_with_a_clear_comment(rig: Rig) -> None:
    repo = rig.forge.world.repo(rig.platform, REPO)
    repo.commits.clear()
    repo.branches.clear()
    repo.trees.clear()
    thread = rig.issue()
    logs = _run_until_settled(rig, 3)
    assert rig.state(thread).status is Status.FAILED
    assert thread.labels == [FAILED]
    comments = _failure_comments(rig, thread)
    assert len(comments) == 1 and "no commit yet" in comments[0]
    assert "repository_empty" in _events(logs)
    assert rig.model.requests == []


def test_transient_errors_back_off_persist_attempts_and_are_capped(rig: Rig) -> None:
    thread = rig.issue()
    rig.model.policy = stepping_policy(steps=1)
    comments = "/notes$" if rig.platform == "gitlab" else "/comments$"
    fault = rig.forge.add_fault(Fault(status=503, method="POST", path=comments, times=10**6))
    rig.run_once()
    rig.run_once()  # the first failure is retried at once, the second starts the backoff
    state = rig.state(thread)
    assert state.forge_failures == 2 and state.status is Status.RUNNING
    assert state.retry_at is not None
    assert datetime.fromisoformat(state.retry_at.replace("Z", "+00:00")) > datetime.now(UTC)
    calls = len(rig.model.requests)
    rig.forge.clear_log()
    rig.run_once()  # backing off: the task is not run
    assert len(rig.model.requests) == calls
    assert rig.forge.count(rig.platform, "POST") == 0

    # Time passes (the saved retry time is reached) with the counter at the cap's edge.
    path = StateStore(rig.state_dir).task_dir(rig.key(thread)) / "task.json"
    raw = json.loads(path.read_text())
    raw.update(retry_at=None, forge_failures=TRANSIENT_ATTEMPTS - 1)
    path.write_text(json.dumps(raw))
    rig.run_once()  # the last attempt fails again
    fault.times = 0
    rig.run_once()  # the failure comment, owed, is delivered now
    assert rig.state(thread).status is Status.FAILED
    assert thread.labels == [FAILED]
    assert len(_failure_comments(rig, thread)) == 1


def test_a_rejected_token_mid_run_logs_once_leaves_tasks_and_fails_health(rig: Rig) -> None:
    thread = rig.issue()
    user = rig.forge.world.users["coding-bot"]

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        user.token = "revoked"  # the token stops working mid-run
        return {"tool_calls": [("post_comment", {"body": "a note"})]}

    rig.model.policy = policy
    daemon = rig.daemon()
    with structlog.testing.capture_logs() as logs:
        try:
            daemon.run_once()
        finally:
            daemon.close()
    assert daemon.auth_error is not None
    # One line per source and cycle (both sources share the revoked account here).
    rejected = [e for e in logs if e["event"] == "forge_auth_failed"]
    assert len([e for e in rejected if e["platform"] == rig.platform]) == 1
    state = rig.state(thread)
    assert state.status is Status.RUNNING and FAILED not in thread.labels
    healthy, reason = check(rig.state_dir, 5, 3, datetime.now(UTC).timestamp())
    assert not healthy and "rejected the token" in reason


def test_classification() -> None:
    assert classify(TransientError("x", 503)).kind is Kind.TRANSIENT
    assert classify(RateLimited("x", 60, 429)).kind is Kind.TRANSIENT
    refused = classify(Forbidden("Repository was archived so is read-only.", 403))
    assert refused.kind is Kind.PERMANENT and refused.event == "forge_repository_archived"
    assert classify(ForgeError("GitHub error 422: Validation Failed", 422)).kind is Kind.PERMANENT


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    low = [backoff(n, 30, lambda: 0.0) for n in range(1, 9)]
    high = [backoff(n, 30, lambda: 1.0) for n in range(1, 9)]
    assert low[0] == high[0] == 0.0  # the first failure retries at the next poll
    assert high[1:4] == [30.0, 60.0, 120.0]
    assert all(lo == hi / 2 for lo, hi in zip(low, high, strict=True))
    assert backoff(40, 30, lambda: 1.0) == 3600.0


def test_run_once_exits_1_when_the_token_is_rejected_mid_run(
    server: ForgeServer, model: LLMServer, platform: str, tmp_path: Path
) -> None:
    thread = server.world.add_thread(platform, REPO, title="T", labels=["coding agent"])
    user = server.world.users["coding-bot"]

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        user.token = "revoked"
        return {"tool_calls": [("post_comment", {"body": "a note"})]}

    model.policy = policy
    config = write_config(tmp_path, server, model)
    done = run_bot(config, "run", "--once")
    assert done.returncode == 1, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    rejected = [e for e in events if e["event"] == "forge_auth_failed"]
    assert len([e for e in rejected if e["platform"] == platform]) == 1
    health = run_bot(config, "healthcheck")
    assert health.returncode == 1 and "rejected the token" in health.stdout
    assert "coding agent processing" in thread.labels


@pytest.mark.parametrize("platform", ["github"])  # one source refused, the other one fine
def test_one_rejected_source_keeps_the_daemon_unhealthy(rig: Rig) -> None:
    rig.forge.add_fault(
        Fault(
            status=401,
            platform="github",
            path=r"/issues$",
            times=10**6,
            body={"message": "Bad credentials"},
        )
    )
    daemon = rig.daemon()
    try:
        daemon.run_once()
    finally:
        daemon.close()
    healthy, reason = check(rig.state_dir, 5, 3, datetime.now(UTC).timestamp())
    assert not healthy and "github" in reason  # the GitLab poll after it did not hide it
