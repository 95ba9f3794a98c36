"""Real `bot` processes: SIGKILL at random moments, SIGTERM, two daemons on one state dir."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from bot.model.state import Status
from bot.model.thread import Kind, Platform, TaskKey
from bot.store.task_files import StateStore
from bot_sandbox.forge_server import ForgeServer, RecordedRequest
from bot_sandbox.llm_server import LLMServer, stepping_policy
from tests.conftest import REPO
from tests.processes import run_bot, start_bot, write_config

MARKER = re.compile(r"<!-- bot:(\S+):(\d+) -->")
KILLS = int(os.environ.get("CRASH_KILLS", "12"))
STEPS = 3 * KILLS


def _key(platform: str, number: int) -> TaskKey:
    return TaskKey(Platform(platform), REPO, Kind.ISSUE, number)


class Killer:
    """Kills the daemon process from inside the emulator, right after a comment was created."""

    def __init__(self, server: ForgeServer) -> None:
        self.pid: int | None = None
        self.armed_post = 0
        self.kills = 0
        server.before_response = self.on_request

    def on_request(self, record: RecordedRequest) -> None:
        if record.method != "POST" or self.pid is None or self.armed_post <= 0:
            return
        self.armed_post -= 1
        if self.armed_post == 0:
            os.kill(self.pid, signal.SIGKILL)  # posted, not yet recorded by the daemon
            self.kills += 1


@pytest.mark.soak
def test_sigkill_at_random_moments_loses_and_repeats_nothing(
    server: ForgeServer, model: LLMServer, platform: str, tmp_path: Path
) -> None:
    rng = random.Random(f"crash-{platform}")
    thread = server.world.add_thread(
        platform, REPO, title="Crash me", body="Do it.", labels=["coding agent"]
    )
    model.policy = stepping_policy(steps=STEPS, delay=0.05)
    config = write_config(tmp_path, server, model, llm=f", max_steps: {STEPS * 3}")
    killer = Killer(server)
    humans: list[str] = []
    writing = threading.Event()
    writing.set()

    def write_comments() -> None:
        n = 0
        while writing.is_set():
            time.sleep(rng.uniform(0.2, 0.8))
            if writing.is_set():
                c = server.world.add_comment(
                    platform, REPO, thread.number, f"human note {n}", author="alice"
                )
                humans.append(f"issue:{c.id}" if platform == "github" else str(c.id))
                n += 1

    writer = threading.Thread(target=write_comments, daemon=True)
    writer.start()
    timer_kills = 0
    try:
        while timer_kills + killer.kills < KILLS:
            proc = start_bot(config, "run", "--once", quiet=True)
            killer.pid = proc.pid
            if rng.random() < 0.35:
                killer.armed_post = rng.randint(1, 3)
                timeout = 20.0
            else:
                timeout = rng.uniform(0.3, 1.6)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                timer_kills += 1
            killer.pid = None
            killer.armed_post = 0
            state = StateStore(tmp_path / "state").load(_key(platform, thread.number))
            if state is not None and state.status is Status.DONE:
                pytest.fail("the task finished before enough kills; raise the step count")
    finally:
        writing.clear()
        writer.join()

    # Let it finish undisturbed.
    for _ in range(5):
        done = run_bot(config, "run", "--once")
        assert done.returncode == 0, done.stderr[-2000:]
        state = StateStore(tmp_path / "state").load(_key(platform, thread.number))
        assert state is not None  # loadable after every kind of death
        if state.status is Status.DONE:
            break
    assert state.status is Status.DONE
    assert timer_kills + killer.kills >= KILLS and killer.kills >= 3

    conversation = (
        StateStore(tmp_path / "state").conversation(_key(platform, thread.number)).entries()
    )
    delivered = [str(r["id"]) for e in conversation for r in e.get("comments") or []]
    assert sorted(delivered) == sorted(humans), (
        "every human comment exactly once in the conversation"
    )
    seen = model.seen_text()
    assert all(f"human note {n}" in seen for n in range(len(humans)))

    markers = [m.group(2) for c in thread.comments for m in MARKER.finditer(c.body)]
    assert len(markers) == len(set(markers)), "no bot comment posted twice"
    notes = [c.body.split("\n")[0] for c in thread.comments if c.author.login == "coding-bot"]
    progress = [n for n in notes if n.startswith("Progress note")]
    assert len(progress) == len(set(progress)) == STEPS
    assert thread.labels == ["coding agent done"]


def _wait_for_requests(model: LLMServer, count: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while len(model.requests) < count:
        assert time.monotonic() < deadline, "the daemon made no progress"
        time.sleep(0.05)


def test_sigterm_checkpoints_and_exits_0_then_continues_without_label_churn(
    server: ForgeServer, model: LLMServer, platform: str, tmp_path: Path
) -> None:
    thread = server.world.add_thread(platform, REPO, title="Long one", labels=["coding agent"])
    model.policy = stepping_policy(steps=6, delay=0.3)
    config = write_config(tmp_path, server, model)
    proc = start_bot(config, "run")
    _wait_for_requests(model, 2)
    asked = len(model.requests)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)  # a hang guard, not a measurement
    assert proc.returncode == 0, err[-2000:]
    # It stopped at the next safe point: at most the model call already on its way, not
    # the remaining steps of the task.
    assert len(model.requests) <= asked + 1
    assert "daemon_stopping" in out
    state = StateStore(tmp_path / "state").load(_key(platform, thread.number))
    assert state is not None and state.status is Status.RUNNING and state.step >= 1
    assert thread.labels == ["coding agent processing"]

    server.clear_log()
    done = run_bot(config, "run", "--once")
    assert done.returncode == 0, done.stderr[-2000:]
    assert thread.labels == ["coding agent done"]
    label_writes = (
        # Thread labels only: the repository's labels are created once on first use.
        server.count(platform, method="POST", path=r"/issues/\d+/labels$")
        + server.count(platform, method="DELETE", path=r"/labels/")
        + server.count(platform, method="PUT", path=r"/issues/\d+$")
    )
    assert label_writes == 2  # processing -> done only: add one, remove one


@pytest.mark.parametrize("platform", ["github"])  # the lock does not depend on the forge
def test_second_daemon_on_the_same_state_dir_exits_2(
    server: ForgeServer, model: LLMServer, platform: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, server, model)
    first = start_bot(config, "run")
    try:
        assert first.stdout is not None
        for line in first.stdout:
            if "daemon_started" in line:
                break
        second = run_bot(config, "run", timeout=60)
        assert second.returncode == 2
        assert "in use by another daemon" in second.stderr
        assert f"pid {first.pid}" in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=15)
    assert first.returncode == 0


FINISH_STEPS = {
    "commit": {"github": r"/git/commits$", "gitlab": r"/repository/commits$"},
    "branch": {"github": r"/git/refs$", "gitlab": r"/repository/commits$"},
    "request": {"github": r"/pulls$", "gitlab": r"/merge_requests$"},
    "final comment": {"github": r"/comments$", "gitlab": r"/notes$"},
}


@pytest.mark.parametrize("moment", list(FINISH_STEPS))
def test_crash_during_finish_makes_one_branch_one_commit_one_request(
    server: ForgeServer, model: LLMServer, platform: str, tmp_path: Path, moment: str
) -> None:
    from bot_sandbox.llm_server import demo_policy

    server.world.push(
        platform,
        REPO,
        "main",
        {"demo/greet.py": 'def greet(name):\n    return "Hello " + name\n'},
        "demo",
    )
    thread = server.world.add_thread(
        platform, REPO, title="Greeting", body="fix demo/greet.py", labels=["coding agent"]
    )
    model.policy = demo_policy()
    config = write_config(tmp_path, server, model)
    pattern = FINISH_STEPS[moment][platform]
    killed: list[str] = []

    def kill_once(record: RecordedRequest) -> None:
        if record.method == "POST" and re.search(pattern, record.path) and not killed and proc.pid:
            killed.append(record.path)
            os.kill(proc.pid, signal.SIGKILL)

    server.before_response = kill_once
    proc = start_bot(config, "run", "--once", quiet=True)
    proc.wait(timeout=60)
    assert killed, f"never reached {moment}"
    server.before_response = None
    done = run_bot(config, "run", "--once")
    assert done.returncode == 0, done.stderr[-2000:]

    repo = server.world.repo(platform, REPO)
    bot_branches = [b for b in repo.branches if b.startswith("bot/")]
    assert bot_branches == [f"bot/{thread.number}-greeting"]
    branch_head = repo.commits[repo.branches[bot_branches[0]]]
    assert branch_head.parents == [repo.branches["main"]]  # exactly one commit on the branch
    assert len([t for t in repo.threads.values() if t.change is not None]) == 1
    finals = [c.body for c in thread.comments if c.body.startswith("greet() now ends")]
    assert len(finals) == 1
    assert thread.labels == ["coding agent done"]
