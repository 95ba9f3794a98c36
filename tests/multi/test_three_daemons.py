"""Three daemons on one PostgreSQL database: SIGKILL at random, SIGSTOP past the lease.

Promises (issue 13): every task ends exactly once, no human comment is lost, no bot comment is
duplicated; a daemon frozen past its lease and woken up posts nothing.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

from bot.model.state import Status
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, stepping_policy
from tests.conftest import REPO
from tests.multi.harness import MARKER, Fleet, key, shared_config, wait_until

TASKS = int(os.environ.get("FLEET_TASKS", "60"))  # across both forges
STEPS = 3  # progress notes per task before it finishes
LEASE = 3.0


def _fleet(
    tmp_path: Path, server: ForgeServer, model: LLMServer, dsn: str, n: int, lease: float
) -> Fleet:
    configs = [shared_config(tmp_path, f"d{i}", server, model, dsn, lease) for i in range(n)]
    fleet = Fleet(configs)
    fleet.migrate()
    return fleet


class Commenter:
    """Writes human comments into threads still at work, until told to stop.

    A thread gets no more comments once it shows its second-to-last progress note: what is
    written later may land after the final safe point, where the protocol delivers nothing."""

    def __init__(self, server: ForgeServer, threads: list[tuple[str, int]], seed: int) -> None:
        self.server = server
        self.threads = threads
        self.rng = random.Random(seed)
        self.written: dict[tuple[str, int], list[str]] = {t: [] for t in threads}
        self.running = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.running.set()
        self._thread.start()

    def stop(self) -> None:
        self.running.clear()
        self._thread.join()

    def _open(self, platform: str, number: int) -> bool:
        thread = self.server.world.thread(platform, REPO, number)
        last = f"Progress note {STEPS - 1}"
        return not any(c.body.startswith(last) for c in list(thread.comments))

    def _run(self) -> None:
        n = 0
        while self.running.is_set():
            time.sleep(self.rng.uniform(0.05, 0.2))
            platform, number = self.rng.choice(self.threads)
            if not self._open(platform, number):
                continue
            body = f"human note {n} for {platform} #{number}"
            c = self.server.world.add_comment(platform, REPO, number, body, author="alice")
            self.written[(platform, number)].append(
                f"issue:{c.id}" if platform == "github" else str(c.id)
            )
            n += 1


def _all_done(fleet: Fleet, threads: list[tuple[str, int]]) -> bool:
    """Every task done, its labels too (a daemon killed between the two leaves the labels to
    the next discovery)."""
    store = fleet.store()
    return all(
        (state := store.load(key(p, n))) is not None
        and state.status is Status.DONE
        and state.labels_applied == Status.DONE
        for p, n in threads
    )


def test_three_daemons_sigkilled_at_random_do_every_task_exactly_once(
    server: ForgeServer, model: LLMServer, pg_dsn: str, tmp_path: Path
) -> None:
    rng = random.Random(os.environ.get("FLEET_SEED", "fleet"))  # kill times and victims
    threads: list[tuple[str, int]] = []
    for i in range(TASKS):
        platform = "github" if i % 2 == 0 else "gitlab"
        t = server.world.add_thread(platform, REPO, title=f"Task {i}", labels=["coding agent"])
        threads.append((platform, t.number))
    model.policy = stepping_policy(steps=STEPS, delay=0.3)
    fleet = _fleet(tmp_path, server, model, pg_dsn, 3, LEASE)
    commenter = Commenter(server, threads, seed=7)
    fleet.start_all()
    commenter.start()
    kills = 0
    try:
        deadline = time.monotonic() + 300
        while not _all_done(fleet, threads):
            assert time.monotonic() < deadline, "the fleet did not finish in 300 s"
            time.sleep(rng.uniform(1.5, 4.0))
            victim = rng.randrange(3)
            fleet.kill(victim)
            kills += 1
            fleet.start(victim)
    finally:
        commenter.stop()
        fleet.stop_all()
    assert kills >= 5, "too few kills to mean anything: slow the tasks down"

    store = fleet.store()
    for platform, number in threads:
        state = store.load(key(platform, number))
        assert state is not None and state.status is Status.DONE
        thread = server.world.thread(platform, REPO, number)
        assert thread.labels == ["coding agent done"], (platform, number, thread.labels)
        mine = [c for c in thread.comments if c.author.login == "coding-bot"]
        markers = [m.group(2) for c in mine for m in MARKER.finditer(c.body)]
        assert len(markers) == len(set(markers)), f"a bot comment posted twice on {number}"
        notes = [c.body.split("\n")[0] for c in mine]
        progress = [n for n in notes if n.startswith("Progress note")]
        assert sorted(progress) == [f"Progress note {k}" for k in range(1, STEPS + 1)], (
            f"{platform} #{number}: {[c.body for c in mine]}"
        )
        finals = [c for c in mine if "Finished after" in c.body]
        assert len(finals) == 1, f"{platform} #{number} ended {len(finals)} times"
        entries = store.conversation(key(platform, number)).entries()
        delivered = [str(r["id"]) for e in entries for r in e.get("comments") or []]
        assert sorted(delivered) == sorted(commenter.written[(platform, number)]), (
            f"{platform} #{number}: every human comment exactly once"
        )


def test_a_daemon_frozen_past_its_lease_posts_nothing_when_it_wakes(
    server: ForgeServer, model: LLMServer, pg_dsn: str, tmp_path: Path
) -> None:
    thread = server.world.add_thread("github", REPO, title="Freeze", labels=["coding agent"])
    model.policy = stepping_policy(steps=4, delay=1.0)
    fleet = _fleet(tmp_path, server, model, pg_dsn, 2, lease=3.0)  # the shortest allowed
    fleet.start(0)
    try:
        wait_until(lambda: len(model.requests) >= 2, 60, "the first daemon at work")
        fleet.signal(0, signal.SIGSTOP)  # mid model call: the reply waits in its socket
        fleet.start(1)
        wait_until(lambda: _all_done(fleet, [("github", thread.number)]), 120, "the takeover")
        server.clear_log()
        fleet.signal(0, signal.SIGCONT)
        wait_until(lambda: "lease_lost" in fleet.log(0).read_text(), 30, "the frozen one")
        time.sleep(1.0)  # anything it would still do after noticing
    finally:
        fleet.stop_all()
    writes = [r for r in list(server.requests) if r.method in ("POST", "PUT", "PATCH", "DELETE")]
    assert writes == [], f"the woken daemon wrote: {[(r.method, r.path) for r in writes]}"
    mine = [c for c in thread.comments if c.author.login == "coding-bot"]
    markers = [m.group(2) for c in mine for m in MARKER.finditer(c.body)]
    assert len(markers) == len(set(markers))
    assert len([c for c in mine if "Finished after" in c.body]) == 1
