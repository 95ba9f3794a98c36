"""`bot sandbox`: the whole product against a local emulated forge and model, no token needed."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from bot import log as logging_setup
from bot.config import parse_settings
from bot.daemon import Daemon
from bot.forge.factory import build_sources
from bot.llm.factory import build_llm
from bot.sandbox.forge_server import ForgeServer
from bot.sandbox.llm_server import LLMServer, demo_policy
from bot.sandbox.world import SThread

DEMO_TOKEN = "sandbox-token-not-a-secret"

DEMO_FILES = {
    "README.md": "# demo\n\nA tiny project used by `bot sandbox`.\n",
    "demo/greet.py": 'def greet(name: str) -> str:\n    return "Hello " + name\n',
}


def seed(server: ForgeServer) -> list[SThread]:
    world = server.world
    world.add_user("coding-bot", token=DEMO_TOKEN)
    roles = {"alice": "write", "coding-bot": "write"}
    world.add_repo("github", "demo/app", files=DEMO_FILES, roles=roles)
    world.add_repo("gitlab", "demo/app", files=DEMO_FILES, roles=roles)
    body = "greet() should add an exclamation mark. Please fix demo/greet.py."
    return [
        world.add_thread(
            platform,
            "demo/app",
            title="Greeting lacks punctuation",
            body=body,
            labels=["coding agent"],
        )
        for platform in ("github", "gitlab")
    ]


def sandbox_config(forge_url: str, llm_url: str, state_dir: Path) -> str:
    return f"""
state_dir: {state_dir}
poll_interval_seconds: 5
github:
  api_url: "{forge_url}"
  token: {DEMO_TOKEN}
  repositories: [demo/app]
  seconds_between_writes: 0
gitlab: {{url: "{forge_url}", token: {DEMO_TOKEN}, projects: [demo/app]}}
llm: {{base_url: "{llm_url}", model: scripted-model, context_window: 8192}}
"""


def show(thread: SThread, platform: str) -> None:
    print(f"\n=== {platform}: #{thread.number} {thread.title}  labels={thread.labels}")
    print(f"@{thread.author.login}: {thread.body}")
    for comment in thread.comments:
        print(
            f"--- @{comment.author.login} at {comment.created_at:%H:%M:%S}:\n{comment.body.strip()}"
        )


def run_demo(state_dir: Path, llm_url: str | None = None) -> int:
    logging_setup.configure("warning")
    with ForgeServer() as forge, LLMServer(demo_policy()) as model:
        threads = seed(forge)
        settings = parse_settings(sandbox_config(forge.url, llm_url or model.url, state_dir), {})
        print(f"sandbox forge at {forge.url}, model at {llm_url or model.url}", file=sys.stderr)
        stop = threading.Event()
        daemon = Daemon(settings, build_sources(settings, stop), build_llm(settings.llm), stop)
        daemon.initialize()
        try:
            daemon.run_once()
        finally:
            daemon.close()
        for thread, platform in zip(threads, ("github", "gitlab"), strict=True):
            show(thread, platform)
    return 0
