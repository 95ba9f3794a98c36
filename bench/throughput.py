"""Throughput: tasks per minute with the scripted model answering instantly, 1 and 8 workers.

Run: .venv/bin/python bench/throughput.py [--tasks 24]
The baseline is one worker (tasks one after another), measured in the same run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench._harness import REPO, daemon, seed, settings
from bot.core import log
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, stepping_policy


def measure(workers: int, tasks: int) -> float:
    with (
        ForgeServer() as forge,
        LLMServer(stepping_policy(steps=2)) as model,
        tempfile.TemporaryDirectory() as tmp,
    ):
        seed(forge)
        for n in range(tasks):
            forge.world.add_thread("github", REPO, title=f"task {n}", labels=["coding agent"])
        d = daemon(settings(forge, model, Path(tmp), workers))
        started = time.perf_counter()
        try:
            d.run_once()
        finally:
            d.close()
        elapsed = time.perf_counter() - started
        done = sum("coding agent done" in t.labels for t in forge.world.all_threads())
        assert done == tasks, f"only {done} of {tasks} finished"
        return tasks / elapsed * 60


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=24)
    args = parser.parse_args()
    log.configure("error")
    one = measure(1, args.tasks)
    eight = measure(8, args.tasks)
    print(f"{'workers':<10}{'tasks/min':>12}{'vs 1 worker':>14}")
    print(f"{1:<10}{one:>12.0f}{1.0:>14.2f}")
    print(f"{8:<10}{eight:>12.0f}{eight / one:>14.2f}")
    work = "3 model calls and 3 comments each, GitHub emulator, model answers at once"
    print(f"({args.tasks} tasks, {work})")


if __name__ == "__main__":
    main()
