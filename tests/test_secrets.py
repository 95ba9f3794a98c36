"""Recognisable fake tokens never appear in logs, state files, comments, requests or errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, Scripted, stepping_policy
from tests.conftest import BOT_TOKEN, REPO
from tests.processes import bot_env

LLM_KEY = "sk-FAKEllmKEY0123456789abcdefghijkl"
GITLAB_FILE_TOKEN = "glpat-FAKEfileTOKEN0123456789"


def run(
    tmp_path: Path, server: ForgeServer, model: LLMServer, github_token: str
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "gitlab-token").write_text(GITLAB_FILE_TOKEN)
    config = tmp_path / "config.yml"
    config.write_text(
        f"state_dir: {tmp_path / 'state'}\nlog_level: debug\n"
        f"github: {{api_url: '{server.url}', token: '${{GH}}', repositories: [{REPO}]}}\n"
        f"gitlab: {{url: '{server.url}', token_file: gitlab-token, projects: [{REPO}]}}\n"
        f"llm: {{base_url: '{model.url}', model: m, api_key: '{LLM_KEY}', max_retries: 0}}\n"
    )
    env = {**bot_env(), "GH": github_token}
    return subprocess.run(
        [sys.executable, "-m", "bot", "run", "--once", "-c", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def leaks(text: str) -> list[str]:
    return [s for s in (BOT_TOKEN, LLM_KEY, GITLAB_FILE_TOKEN) if s in text]


def everything(
    tmp_path: Path, server: ForgeServer, model: LLMServer, done: subprocess.CompletedProcess[str]
) -> str:
    files = [p.read_text(errors="replace") for p in (tmp_path / "state").rglob("*") if p.is_file()]
    comments = [c.body for t in server.world.all_threads() for c in t.comments]
    return "\n".join([done.stdout, done.stderr, *files, *comments, model.seen_text()])


def test_no_token_anywhere_in_a_full_debug_run(
    server: ForgeServer, model: LLMServer, tmp_path: Path
) -> None:
    server.world.add_user("gl-bot", token=GITLAB_FILE_TOKEN)  # GitLab uses its own token
    server.world.repo("gitlab", REPO).roles["gl-bot"] = "write"
    for platform in ("github", "gitlab"):
        server.world.add_thread(
            platform, REPO, title=f"echo {BOT_TOKEN[:6]}", labels=["coding agent"]
        )
    model.policy = stepping_policy(steps=1)
    done = run(tmp_path, server, model, BOT_TOKEN)
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"level": "debug"' in done.stdout  # library debug logs included: headers, URLs
    assert leaks(everything(tmp_path, server, model, done)) == []


def test_no_token_in_failures(server: ForgeServer, model: LLMServer, tmp_path: Path) -> None:
    bad = "ghp_FAKEbadTOKEN0123456789abcdefABCDEF"
    done = run(tmp_path, server, model, bad)
    assert done.returncode == 1 and "forge_auth_failed" in done.stdout
    assert bad not in done.stdout + done.stderr and leaks(done.stdout + done.stderr) == []

    server.world.add_user("gl-bot", token=GITLAB_FILE_TOKEN)
    server.world.add_thread("github", REPO, title="model refuses", labels=["coding agent"])
    model.push(Scripted(status=401), Scripted(status=401))
    (tmp_path / "second").mkdir()
    done = run(tmp_path / "second", server, model, BOT_TOKEN)
    assert done.returncode == 0, done.stderr[-2000:]
    text = everything(tmp_path / "second", server, model, done)
    assert "refused the request (401)" in text
    assert leaks(text) == []
