"""Latency from a comment being written to it being in the model's next request.

Run: .venv/bin/python -m bench.latency
The model takes 0.2 s per step (a fast local model); comments are written at random moments
into a thread that already has 120 comments. Baseline: the seed design (first page only,
whole list each check), measured in the same run.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench._harness import REPO, TOKEN, daemon, seed, settings
from bench.naive import NaiveGitHubForge
from bot.core import log
from bot.forge.factory import Source
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, stepping_policy
from bot_sandbox.world import StepClock

COMMENTS = 6


def measure(naive: bool) -> list[float | None]:
    rng = random.Random(3)
    model_policy = stepping_policy(steps=40, delay=0.2)
    with (
        ForgeServer() as forge,
        LLMServer(model_policy) as model,
        tempfile.TemporaryDirectory() as tmp,
    ):
        seed(forge)
        forge.world.clock = StepClock()  # type: ignore[method-assign]
        thread = forge.world.add_thread("github", REPO, title="long task", labels=["coding agent"])
        for n in range(120):
            forge.world.add_comment(
                "github", REPO, thread.number, f"old comment {n}", author="alice"
            )
        cfg = settings(forge, model, Path(tmp))
        sources = None
        if naive:
            forge_ = NaiveGitHubForge(
                forge.url, TOKEN, watch_labels=["coding agent"], seconds_between_writes=0
            )
            sources = [Source(forge_, (REPO,))]
        d = daemon(cfg, sources)
        runner = threading.Thread(target=d.run_once)
        runner.start()
        written: list[tuple[str, float]] = []
        time.sleep(1.0)
        for n in range(COMMENTS):
            time.sleep(rng.uniform(0.3, 1.2))
            text = f"new remark number {n}"
            forge.world.add_comment("github", REPO, thread.number, text, author="alice")
            written.append((text, time.monotonic()))
        runner.join()
        d.close()
        latencies: list[float | None] = []
        for text, at in written:
            seen = next(
                (
                    t
                    for r, t in zip(model.requests, model.arrived, strict=True)
                    if text in str(r["messages"])
                ),
                None,
            )
            latencies.append(None if seen is None else seen - at)
        return latencies


def describe(values: list[float | None]) -> str:
    got = [v for v in values if v is not None]
    lost = len(values) - len(got)
    if not got:
        return f"never delivered ({lost} of {len(values)} lost)"
    return (
        f"median {statistics.median(got):.2f}s, max {max(got):.2f}s, lost {lost} of {len(values)}"
    )


def main() -> None:
    log.configure("error")
    ours, base = measure(naive=False), measure(naive=True)
    print(f"{'design':<10} comment written -> in the model's next request")
    print(f"{'ours':<10} {describe(ours)}")
    print(f"{'seed':<10} {describe(base)}")
    print("(model step 0.2 s; thread of 120 comments; the seed design reads only the first page)")


if __name__ == "__main__":
    main()
