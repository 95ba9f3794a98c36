"""Faults against the emulators over HTTP, with the real daemon."""

from __future__ import annotations

import re
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import structlog

from bot.forge.github import RESET_MARGIN
from bot.model.state import Status
from bot.store.task_files import StateStore
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, Scripted, count_tool_results, stepping_policy
from tests.conftest import REPO
from tests.processes import bot_env, write_config
from tests.rig import Rig, comment_id

MARKER = re.compile(r"<!-- bot:(\S+):(\d+) -->")


def test_random_faults_on_20_percent_of_requests_across_10_tasks(rig: Rig) -> None:
    rig.forge_timeout = 1
    # A run cut by a fault is retried at the next cycle here: the backoff between runs is
    # exercised by tests/faults/test_forge_errors.py, not by a loop of cycles with no clock.
    rig.extra_config = "agent: {retry_backoff_seconds: 0}"
    threads = [rig.issue(title=f"task {n}", body=f"do thing {n}") for n in range(10)]
    humans: dict[int, list[str]] = {t.number: [] for t in threads}
    by_title = {t.title: t for t in threads}

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        done = count_tool_results(request)
        title = re.search(r"Issue \S+: (task \d+)", str(request["messages"][1]["content"]))
        thread = by_title[title.group(1)] if title else None
        if thread is not None and done == 1 and not humans[thread.number]:
            humans[thread.number].append(
                comment_id(rig.platform, rig.comment(thread, "mid-run remark"))
            )
        return stepping_policy(steps=2)(request)

    rig.model.policy = policy
    rig.forge.random_fault_rate = 0.2
    rig.forge.random_fault_delay = 1.5
    for _ in range(30):
        rig.run_once()
        # Done on disk first; a label change that failed is made at a later cycle.
        if all(_has_state(rig, t) and rig.state(t).status is Status.DONE for t in threads) and all(
            t.labels == ["coding agent done"] for t in threads
        ):
            break
    rig.forge.random_fault_rate = 0.0
    faulted = [r for r in rig.forge.requests if r.status in (0, 500, 502, 503)]
    assert len(faulted) > 20  # the faults really happened
    for thread in threads:
        assert rig.state(thread).status is Status.DONE, thread.title
        assert thread.labels == ["coding agent done"]
        assert sorted(rig.delivered_ids(thread)) == sorted(humans[thread.number])
        markers = [m.group(0) for c in thread.comments for m in MARKER.finditer(c.body)]
        assert len(markers) == len(set(markers)), f"duplicate bot comment on {thread.title}"
        notes = [c.body.split("\n")[0] for c in thread.comments if c.author.login == "coding-bot"]
        assert sorted(notes) == sorted(set(notes))


def _has_state(rig: Rig, thread: Any) -> bool:
    return StateStore(rig.state_dir).load(rig.key(thread)) is not None


def test_rate_limit_mid_run_waits_logs_once_and_continues(rig: Rig) -> None:
    thread = rig.issue()
    limited = []

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        if count_tool_results(request) == 1 and not limited:
            limited.append(count_tool_results(request))
            rig.forge.rate_limit_for(rig.platform, 2.0)
        return stepping_policy(steps=2)(request)

    rig.model.policy = policy
    with structlog.testing.capture_logs() as logs:
        rig.run_once()
    assert thread.labels == ["coding agent done"]
    events = [e for e in logs if e["event"] == "forge_rate_limited"]
    # The wait told by the headers: a reset at the next whole second after now + 2, plus the
    # adapter's margin (an upper bound that holds however slow the machine is).
    assert len(events) == 1 and 0 < events[0]["retry_after"] <= 3.0 + RESET_MARGIN
    # The emulator refuses every request until the reset it advertised, so one refusal
    # followed by accepted requests means nothing was sent to the host while it waited.
    statuses = [r.status for r in rig.forge.requests if r.platform == rig.platform]
    refused = [i for i, status in enumerate(statuses) if status in (403, 429)]
    assert len(refused) == 1
    assert statuses[refused[0] + 1] < 400


def test_model_garbage_and_outages_never_crash_a_worker(rig: Rig) -> None:
    thread = rig.issue()
    rig.llm_options = ", max_retries: 0"
    rig.model.push(
        Scripted(status=200, content=None, tool_calls=[]),  # an empty reply: nudged
        Scripted(status=500),
        Scripted(tool_calls=[("finish", "{{{")], raw_arguments=True),  # malformed arguments
        Scripted(status=429, headers={"retry-after": "0"}),
        Scripted(content="The answer, as plain text."),
    )
    for _ in range(4):
        rig.run_once()
        if rig.state(thread).status is Status.DONE:
            break
    assert rig.state(thread).status is Status.DONE
    assert rig.bot_comments(thread)[-1].startswith("The answer, as plain text.")


def test_model_returning_non_json_is_answered(rig: Rig, monkeypatch: Any) -> None:
    thread = rig.issue()
    rig.llm_options = ", max_retries: 0"
    original = rig.model.next_answer

    def broken(request: dict[str, Any]) -> Scripted:
        original(request)
        return Scripted(status=502, headers={"content-type": "text/html"})

    monkeypatch.setattr(rig.model, "next_answer", broken)
    for _ in range(3):
        rig.run_once()
    assert rig.state(thread).status is Status.FAILED
    assert "could not be reached" in rig.bot_comments(thread)[-1]


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # every write to a file fails: EFBIG


def test_full_disk_keeps_the_previous_state_and_never_says_done(
    server: ForgeServer, model: LLMServer, platform: str, tmp_path: Path
) -> None:
    thread = server.world.add_thread(platform, REPO, title="Disk", labels=["coding agent"])
    model.push(Scripted(status=503))  # the first run stops early, with a saved state
    model.policy = stepping_policy(steps=1)
    config = write_config(tmp_path, server, model, llm=", max_retries: 0")
    first = subprocess.run(
        [sys.executable, "-m", "bot", "run", "--once", "-c", str(config)],
        env=bot_env(),
        capture_output=True,
        timeout=60,
    )
    assert first.returncode == 0
    store = StateStore(tmp_path / "state")
    task_dir = next((tmp_path / "state" / "tasks").glob("*/*/*"))
    before = (task_dir / "task.json").read_bytes()
    assert store.all_states()[0].status is Status.RUNNING

    full = subprocess.run(
        [sys.executable, "-m", "bot", "run", "--once", "-c", str(config)],
        env=bot_env(),
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_file_size,
    )
    assert full.returncode == 0, full.stderr[-2000:]
    assert '"event": "state_save_failed"' in full.stdout
    assert (task_dir / "task.json").read_bytes() == before  # intact, not half-written
    assert "coding agent done" not in thread.labels
    assert not list(task_dir.glob(".*.tmp"))
