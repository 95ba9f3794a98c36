"""`bot sandbox`: the whole product against a local emulated forge, no token needed."""

from __future__ import annotations

import sys
from pathlib import Path

from bot import log as logging_setup
from bot.config import parse_settings
from bot.discovery import discover
from bot.forge.factory import build_sources
from bot.sandbox.forge_server import ForgeServer

DEMO_TOKEN = "sandbox-token-not-a-secret"

DEMO_FILES = {
    "README.md": "# demo\n\nA tiny project used by `bot sandbox`.\n",
    "demo/greet.py": 'def greet(name: str) -> str:\n    return "Hello " + name\n',
}


def seed(server: ForgeServer) -> None:
    world = server.world
    world.add_user("coding-bot", token=DEMO_TOKEN)
    roles = {"alice": "write", "coding-bot": "write"}
    world.add_repo("github", "demo/app", files=DEMO_FILES, roles=roles)
    world.add_repo("gitlab", "demo/app", files=DEMO_FILES, roles=roles)
    body = "greet() should add an exclamation mark. Please fix demo/greet.py."
    for platform in ("github", "gitlab"):
        world.add_thread(
            platform,
            "demo/app",
            title="Greeting lacks punctuation",
            body=body,
            labels=["coding agent"],
        )


def sandbox_config(server: ForgeServer, state_dir: Path) -> str:
    return f"""
state_dir: {state_dir}
github:
  api_url: "{server.url}"
  token: {DEMO_TOKEN}
  repositories: [demo/app]
  seconds_between_writes: 0
gitlab: {{url: "{server.url}", token: {DEMO_TOKEN}, projects: [demo/app]}}
"""


def run_demo(state_dir: Path) -> int:
    logging_setup.configure("info")
    with ForgeServer() as server:
        seed(server)
        settings = parse_settings(sandbox_config(server, state_dir), {})
        print(f"sandbox forge at {server.url} (GitHub at /, GitLab at /api/v4)", file=sys.stderr)
        for source in build_sources(settings):
            for task in discover(source).tasks:
                print(f"found {task.key}: {task.title} {sorted(task.labels)}", file=sys.stderr)
    return 0
