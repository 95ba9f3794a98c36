"""Helpers to run `bot` as a real process against in-test servers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer
from tests.rig import config_text


def write_config(
    tmp_path: Path, forge: ForgeServer, model: LLMServer, extra: str = "", llm: str = ""
) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(config_text(forge, model, tmp_path / "state", extra, llm))
    return path


def bot_env() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_SOCKET", "CREDENTIALS"))
    }
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_bot(config: Path, *args: str, quiet: bool = False) -> subprocess.Popen[str]:
    # A quiet process writes to /dev/null: a full pipe nobody reads would block it.
    output = subprocess.DEVNULL if quiet else subprocess.PIPE
    return subprocess.Popen(
        [sys.executable, "-m", "bot", *args, "-c", str(config)],
        stdout=output,
        stderr=output,
        text=True,
        env=bot_env(),
    )


def run_bot(config: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args, "-c", str(config)],
        capture_output=True,
        text=True,
        env=bot_env(),
        timeout=timeout,
        check=False,
    )
