"""The composition root closes what it opened, also when start-up fails half-way: a webhook
port that is taken after the daemon took the state dir and the metrics port leaves neither
held (python-telegram-bot's `Application.__aenter__` contract)."""

from __future__ import annotations

import socket

import pytest

from bot.app import Application, ListenError
from bot.store.errors import StateError
from bot.store.task_files import DaemonLock
from tests.rig import Rig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_failed_start_releases_the_state_dir_and_the_metrics_port(rig: Rig) -> None:
    metrics_port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        hook_port = taken.getsockname()[1]
        rig.extra_config = (
            f"metrics: {{listen: '127.0.0.1:{metrics_port}'}}\n"
            f"webhooks: {{listen: '127.0.0.1:{hook_port}', github_secret: s3cret}}\n"
        )
        with pytest.raises(ListenError) as refused, Application(rig.settings, once=False):
            pytest.fail("started although the webhook port is taken")
    assert refused.value.key == "webhooks.listen"
    # The state dir's lock is free again: another daemon takes it at once.
    lock = DaemonLock(rig.state_dir)
    try:
        lock.acquire()
    except StateError as exc:
        pytest.fail(f"the failed start still holds the state dir: {exc}")
    finally:
        lock.release()
    # And the metrics port is free to bind again.
    with socket.socket() as again:
        again.bind(("127.0.0.1", metrics_port))


def test_a_started_application_closes_everything_on_exit(rig: Rig) -> None:
    metrics_port = free_port()
    rig.extra_config = f"metrics: {{listen: '127.0.0.1:{metrics_port}'}}\n"
    with Application(rig.settings, once=True) as app:
        app.run()
    with socket.socket() as again:
        again.bind(("127.0.0.1", metrics_port))
    lock = DaemonLock(rig.state_dir)
    lock.acquire()
    lock.release()
