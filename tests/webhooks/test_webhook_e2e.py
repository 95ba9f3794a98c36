"""Signed deliveries from the emulator drive a task from label to pull/merge request, without
waiting for a poll: the daemon polls once at start, then only the webhooks can tell it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from bot.model.state import Status
from bot.service.daemon import Daemon
from bot.service.webhooks.factory import build_webhooks
from bot_sandbox.webhook_sender import Target, WebhookSender
from bot_sandbox.world import SThread
from tests.conftest import REPO
from tests.rig import Rig
from tests.test_agent_e2e import CHANGE, scripted

SECRET = "emulator-webhook-secret"
HOOKS = f"""
poll_interval_seconds: 3600
webhooks: {{listen: "127.0.0.1:0", github_secret: {SECRET}, gitlab_secret: {SECRET}}}
"""


def wait_for(predicate: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def done(rig: Rig, thread: SThread) -> bool:
    path = rig.state_dir / "tasks"
    return (
        path.exists() and any(path.rglob("task.json")) and rig.state(thread).status is Status.DONE
    )


def polls(daemon: Daemon) -> float:
    return sum(
        sample.value
        for metric in daemon.metrics.registry.collect()
        if metric.name == "bot_polls"
        for sample in metric.samples
        if sample.name == "bot_polls_total"
    )


@contextmanager
def running(rig: Rig, secret: bytes = SECRET.encode()) -> Iterator[tuple[Daemon, WebhookSender]]:
    """The daemon with its listener, as `bot run` starts them, and the emulator's deliveries
    (signed with `secret`) going to it; polled once at start, then never for an hour."""
    rig.extra_config = HOOKS
    rig.model.policy = scripted(*CHANGE)
    daemon = rig.daemon()
    hooks = build_webhooks(rig.settings, daemon.request_check, daemon.store.deliveries())
    assert hooks is not None
    hooks.start()
    target = Target(f"{hooks.url}/webhooks/{rig.platform}", secret)
    sender = WebhookSender(rig.forge.world, {rig.platform: target})
    runner = threading.Thread(target=daemon.run_forever)
    runner.start()
    try:
        wait_for(lambda: polls(daemon) == len(daemon.sources))  # the start-up polls happened
        yield daemon, sender
    finally:
        rig.stop.set()
        runner.join(timeout=60)
        sender.close()
        hooks.stop()
        daemon.close()


def test_label_to_change_request_by_webhook_alone(rig: Rig) -> None:
    with running(rig) as (daemon, sender):
        thread = rig.issue(labels=[], title="Say hello", body="src/app.py should print hello.")
        rig.set_labels(thread, ["coding agent"])  # a writer labels it: one delivery
        wait_for(lambda: done(rig, thread))
        assert sender.statuses and set(sender.statuses) == {202}
        assert polls(daemon) == len(daemon.sources)  # no poll since: only the delivery told
    repo = rig.forge.world.repo(rig.platform, REPO)
    (request,) = [t.change for t in repo.threads.values() if t.change is not None]
    assert request is not None
    files = repo.files(request.head)
    assert files is not None and files["src/app.py"] == b"print('hello')\n"


def test_a_forged_delivery_starts_nothing(rig: Rig) -> None:
    with running(rig, secret=b"guess") as (_daemon, forged):
        thread = rig.issue(labels=[], title="Say hello", body="src/app.py should print hello.")
        rig.set_labels(thread, ["coding agent"])
        wait_for(lambda: bool(forged.statuses))
        time.sleep(1)
        assert forged.statuses == [401]
        assert rig.model.requests == [] and not rig.bot_comments(thread)


def test_a_writers_mention_on_an_unlabelled_thread_starts_by_webhook(rig: Rig) -> None:
    with running(rig) as (daemon, _sender):
        ignored = rig.issue(labels=[], title="Not me", body="src/app.py should print hello.")
        rig.comment(ignored, "@coding-bot please do it", author="bob")  # bob can only read
        thread = rig.issue(labels=[], title="Say hello", body="src/app.py should print hello.")
        rig.comment(thread, "@coding-bot could you take this?")  # alice can write
        wait_for(lambda: done(rig, thread))
        assert polls(daemon) == len(daemon.sources)  # the deliveries alone told it
        assert not rig.bot_comments(ignored) and not ignored.labels  # a reader cannot start it
