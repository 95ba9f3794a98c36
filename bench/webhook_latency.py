"""From a person labelling a thread to the model's first request: webhooks against polling.

Run: .venv/bin/python -m bench.webhook_latency [--events 4] [--poll 10]

Both daemons run forever against the emulator; a writer labels a new issue at a random moment,
`--events` times. With webhooks the emulator sends a signed delivery and the daemon checks that
one thread (its poll interval is an hour, so only the delivery can tell it); the baseline only
polls, every `--poll` seconds (the default configuration polls every 60 s: its latency is about
half of that on average, and at worst all of it).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench._harness import REPO, daemon, seed, settings
from bot.core import log
from bot.core.config import parse_settings
from bot.service.webhooks.factory import build_webhooks
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer
from bot_sandbox.webhook_sender import Target, WebhookSender

SECRET = "bench-secret"


def finish_at_once(_request: dict[str, object]) -> dict[str, object]:
    return {"tool_calls": [("finish", {"summary": "ok"})]}


def measure(events: int, poll: int, webhooks: bool) -> list[float]:
    rng = random.Random(5)
    with (
        ForgeServer() as forge,
        LLMServer(finish_at_once) as model,
        tempfile.TemporaryDirectory() as tmp,
    ):
        seed(forge)
        base = settings(forge, model, Path(tmp)).model_dump(mode="json")
        base["poll_interval_seconds"] = 3600 if webhooks else poll
        base["github"]["token"] = "bench-token"
        if webhooks:
            base["webhooks"] = {"listen": "127.0.0.1:0", "github_secret": SECRET}
        cfg = parse_settings(_yaml(base), {})
        d = daemon(cfg)
        hooks = build_webhooks(cfg, d.request_check, d.store.deliveries()) if webhooks else None
        sender = None
        if hooks is not None:
            hooks.start()
            target = Target(f"{hooks.url}/webhooks/github", SECRET.encode())
            sender = WebhookSender(forge.world, {"github": target})
        runner = threading.Thread(target=d.run_forever)
        runner.start()
        latencies = []
        try:
            time.sleep(1.0)
            for n in range(events):
                time.sleep(rng.uniform(0.5, poll))
                thread = forge.world.add_thread("github", REPO, title=f"task {n}", labels=[])
                before = len(model.requests)
                forge.world.set_labels("github", REPO, thread.number, ["coding agent"])
                labelled = time.monotonic()
                while len(model.requests) == before:
                    time.sleep(0.02)
                latencies.append(model.arrived[before] - labelled)
        finally:
            d.stop.set()
            runner.join()
            if sender is not None:
                sender.close()
            if hooks is not None:
                hooks.stop()
            d.close()
        return latencies


def _yaml(data: dict[str, object]) -> str:
    import yaml

    return yaml.safe_dump(data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=4)
    parser.add_argument("--poll", type=int, default=10)
    args = parser.parse_args()
    log.configure("error")
    hooked = measure(args.events, args.poll, webhooks=True)
    polled = measure(args.events, args.poll, webhooks=False)
    print("label added -> the model's first request, seconds")
    for name, values in (("webhooks", hooked), (f"polling every {args.poll} s", polled)):
        print(f"{name:24} median {statistics.median(values):6.2f}   max {max(values):6.2f}")
    ratio = statistics.median(polled) / statistics.median(hooked)
    print(f"polling / webhooks (median): {ratio:.0f}x")


if __name__ == "__main__":
    main()
