"""Shared set-up for the benchmarks: emulator, scripted model, daemon settings."""

from __future__ import annotations

import threading
from pathlib import Path

from bot.app import build_daemon
from bot.core.config import Settings, parse_settings
from bot.forge.factory import Source
from bot.service.daemon import Daemon
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer

TOKEN = "bench-token"
REPO = "bench/app"


def seed(forge: ForgeServer, platforms: tuple[str, ...] = ("github",)) -> None:
    forge.world.add_user("coding-bot", token=TOKEN)
    for platform in platforms:
        forge.world.add_repo(
            platform,
            REPO,
            files={"README.md": "# bench\n", "src/a.py": "x = 1\n"},
            roles={"alice": "write"},
        )


def settings(
    forge: ForgeServer, model: LLMServer, state_dir: Path, workers: int = 2, gitlab: bool = False
) -> Settings:
    text = f"""
state_dir: {state_dir}
poll_interval_seconds: 5
max_concurrent_tasks: {workers}
github:
  api_url: "{forge.url}"
  token: {TOKEN}
  repositories: [{REPO}]
  seconds_between_writes: 0
llm: {{base_url: "{model.url}", model: scripted, max_steps: 200}}
log_level: error
"""
    if gitlab:
        text += f'gitlab: {{url: "{forge.url}", token: {TOKEN}, projects: [{REPO}]}}\n'
    return parse_settings(text, {})


def daemon(cfg: Settings, sources: list[Source] | None = None) -> Daemon:
    stop = threading.Event()
    d = build_daemon(cfg, stop, sources=sources)
    d.initialize()
    return d
