"""Several daemons on one PostgreSQL database: throughput with 1, 2 and 3 daemons, and how long
a SIGKILLed daemon's task takes to move on to another one.

Run: .venv/bin/python -m bench.fleet [--tasks 36] [--delay 1.0] [--lease 3] [--kills 3]

Real `bot run` processes, a throwaway PostgreSQL cluster (`initdb` in a temp dir, Unix socket),
the emulator and the scripted model. Each task is three model calls of `--delay` seconds (the
model's latency dominates real tasks too); each daemon works up to 4 tasks at once, so more
daemons should finish the same tasks sooner: printed as tasks per minute and as the ratio to
one daemon. The takeover time is from the SIGKILL of the daemon holding a task to another
daemon holding it: about the rest of the lease plus one look at the queue (2 s).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bot.model.state import Status
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, stepping_policy
from tests.conftest import REPO, seed_world
from tests.multi.harness import Fleet, key, shared_config, wait_until
from tests.pg import Cluster


def _fleet(
    root: Path, forge: ForgeServer, model: LLMServer, dsn: str, n: int, lease: float
) -> Fleet:
    fleet = Fleet([shared_config(root, f"d{i}", forge, model, dsn, lease) for i in range(n)])
    fleet.migrate()
    return fleet


def throughput(cluster: Cluster, daemons: int, tasks: int, delay: float) -> float:
    """Tasks per minute, from the daemons' start to the last task done."""
    with (
        ForgeServer() as forge,
        LLMServer(stepping_policy(steps=2, delay=delay)) as model,
        tempfile.TemporaryDirectory() as tmp,
    ):
        seed_world(forge)
        numbers = [
            forge.world.add_thread("github", REPO, title=f"T{i}", labels=["coding agent"]).number
            for i in range(tasks)
        ]
        fleet = _fleet(Path(tmp), forge, model, cluster.create_database(), daemons, 30.0)
        store = fleet.store()
        start = time.monotonic()
        fleet.start_all()
        try:
            wait_until(
                lambda: all(
                    (s := store.load(key("github", n))) is not None and s.status is Status.DONE
                    for n in numbers
                ),
                600,
                "every task done",
                step=0.1,
            )
        finally:
            elapsed = time.monotonic() - start
            fleet.stop_all()
        return tasks / elapsed * 60


def takeover(cluster: Cluster, lease: float) -> float:
    """Seconds from the SIGKILL of the daemon holding the task to another daemon holding it."""
    with (
        ForgeServer() as forge,
        LLMServer(stepping_policy(steps=200, delay=0.2)) as model,
        tempfile.TemporaryDirectory() as tmp,
    ):
        seed_world(forge)
        thread = forge.world.add_thread("github", REPO, title="Long", labels=["coding agent"])
        task = str(key("github", thread.number))
        fleet = _fleet(Path(tmp), forge, model, cluster.create_database(), 2, lease)
        store = fleet.store()
        fleet.start_all()
        try:
            wait_until(  # at work: held, and a few steps into the task
                lambda: (
                    task in store.holders()
                    and (s := store.load(key("github", thread.number))) is not None
                    and s.step >= 2
                ),
                60,
                "a holder at work",
                step=0.05,
            )
            first = store.holders()[task].daemon
            fleet.kill(int(first.removeprefix("d")))
            killed = time.monotonic()
            wait_until(
                lambda: (h := store.holders().get(task)) is not None and h.daemon != first,
                60 + 3 * lease,
                "the takeover",
                step=0.05,
            )
            return time.monotonic() - killed
        finally:
            fleet.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=36)
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--kills", type=int, default=3)
    args = parser.parse_args()
    with Cluster() as cluster:
        rates = {n: throughput(cluster, n, args.tasks, args.delay) for n in (1, 2, 3)}
        for n, rate in rates.items():
            print(f"{n} daemon(s): {rate:6.1f} tasks/min  ratio to one: {rate / rates[1]:.2f}")
        times = [takeover(cluster, args.lease) for _ in range(args.kills)]
        print(
            f"SIGKILL -> another daemon holds the task: median {statistics.median(times):.1f} s"
            f" (lease {args.lease:g} s; each: {', '.join(f'{t:.1f}' for t in times)})"
        )


if __name__ == "__main__":
    main()
