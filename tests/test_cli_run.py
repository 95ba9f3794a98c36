"""`bot run --once` as a real process against the emulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer
from tests.conftest import BOT_TOKEN, REPO


def run_bot(
    tmp_path: Path, server: ForgeServer, model: LLMServer, token: str = BOT_TOKEN
) -> subprocess.CompletedProcess[str]:
    # The model is always the emulator: the default base_url would reach whatever model
    # happens to listen on 127.0.0.1:11434.
    config = tmp_path / "config.yaml"
    config.write_text(
        f"""
state_dir: {tmp_path / "state"}
github:
  api_url: "{server.url}"
  token: "${{GH_TOKEN}}"
  repositories: [{REPO}]
  seconds_between_writes: 0
gitlab: {{url: "{server.url}", token_file: token, projects: [{REPO}]}}
llm: {{base_url: "{model.url}", model: {model.model}}}
"""
    )
    (tmp_path / "token").write_text(token)
    env = {k: v for k, v in os.environ.items() if k != "CREDENTIALS_DIRECTORY"}
    env["GH_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "bot", "run", "--once", "-c", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_run_once_prints_found_tasks(tmp_path: Path, server: ForgeServer, model: LLMServer) -> None:
    threads = {}
    for platform in ("github", "gitlab"):
        threads[platform] = server.world.add_thread(
            platform, REPO, title=f"{platform} task", labels=["coding agent"]
        )
        server.world.add_thread(platform, REPO, title="ignored")
    done = run_bot(tmp_path, server, model)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    found = {e["task"] for e in events if e["event"] == "task_discovered"}
    assert found == {f"github:{REPO}#1", f"gitlab:{REPO}#1"}
    # Both tasks ran to the end against the emulated model, and only against it.
    assert all(t.labels == ["coding agent done"] for t in threads.values())
    titles = {t for t in ("github task", "gitlab task") for r in model.requests if t in str(r)}
    assert titles == {"github task", "gitlab task"}
    assert BOT_TOKEN not in done.stdout + done.stderr


def test_run_once_with_a_bad_token_exits_1_without_leaking_it(
    tmp_path: Path, server: ForgeServer, model: LLMServer
) -> None:
    bad = "ghp_BADTOKENBADTOKEN0123456789abcdef"
    done = run_bot(tmp_path, server, model, token=bad)
    assert done.returncode == 1
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert any(e["event"] == "forge_auth_failed" for e in events)
    assert bad not in done.stdout + done.stderr
    assert model.requests == []  # nothing ran without a forge identity


def test_status_lists_tasks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli import main
    from bot.model.state import Status, TaskState
    from bot.store.task_files import StateStore

    config = tmp_path / "c.yaml"
    config.write_text(
        f"state_dir: {tmp_path / 'state'}\ngithub: {{token: x, repositories: [a/b]}}\n"
    )
    assert main(["status", "-c", str(config)]) == 0
    assert "no tasks" in capsys.readouterr().out
    store = StateStore(tmp_path / "state")
    store.save(TaskState(key="github:a/b#1", status=Status.PAUSED, step=4))
    store.save(TaskState(key="gitlab:g/p!2", status=Status.DONE, step=9, run=2))
    assert main(["status", "-c", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["task", "status", "run", "step", "tokens"]
    rows = {line.split()[0]: line.split()[1:4] for line in lines[1:]}
    assert rows == {"github:a/b#1": ["paused", "1", "4"], "gitlab:g/p!2": ["done", "2", "9"]}
