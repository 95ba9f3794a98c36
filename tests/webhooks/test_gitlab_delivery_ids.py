"""GitLab's delivery headers as GitLab sends them, from the emulator to the real listener.

One request that fires two events (a note whose quick action sets a label) gives both
deliveries one X-Gitlab-Event-UUID; a resend keeps the Idempotency-Key; GitLab versions before
these headers send none. The note is written through the real python-gitlab client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gitlab
import pytest
import requests

from bot.model.thread import Kind, Platform, TaskKey
from bot.service.webhooks.server import WebhookApp, WebhookServer
from bot.store.seen import SeenDeliveries
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.webhook_sender import Target, WebhookSender
from tests.conftest import ALICE_TOKEN, REPO

SECRET = b"gl-emulated-secret"
KEY = TaskKey(Platform.GITLAB, REPO, Kind.ISSUE, 1)


def wait_for(predicate: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class Hooked:
    """The listener, and the emulator's GitLab deliveries going to it."""

    def __init__(self, server: ForgeServer, tmp_path: Path, version: tuple[int, int]) -> None:
        self.checked: list[TaskKey] = []
        app = WebhookApp({Platform.GITLAB: SECRET}, self.checked.append, SeenDeliveries(tmp_path))
        self.listener = WebhookServer(app, "127.0.0.1:0").start()
        target = Target(f"{self.listener.url}/webhooks/gitlab", SECRET)
        self.sender = WebhookSender(server.world, {"gitlab": target}, gitlab_version=version)

    def answers(self, count: int) -> list[int]:
        wait_for(lambda: len(self.sender.statuses) >= count)
        return self.sender.statuses

    def close(self) -> None:
        self.sender.close()
        self.listener.stop()


@pytest.fixture
def hooked(server: ForgeServer, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Hooked]:
    version = getattr(request, "param", (17, 4))
    hooked = Hooked(server, tmp_path / "seen", version)
    yield hooked
    hooked.close()


def write_note(server: ForgeServer, text: str, **headers: str) -> None:
    client = gitlab.Gitlab(server.url, private_token=ALICE_TOKEN)
    issue = client.projects.get(REPO, lazy=True).issues.get(1, lazy=True)
    issue.notes.create({"body": text}, extra_headers=headers)


def test_one_request_two_events_one_event_uuid_both_accepted(
    server: ForgeServer, hooked: Hooked
) -> None:
    server.world.add_thread("gitlab", REPO, title="t")
    write_note(server, 'Please have a look.\n/label ~"coding agent"')
    assert hooked.answers(2) == [202, 202]  # was [202, 409]: the UUID taken for a delivery id
    first, second = (d.headers for d in hooked.sender.sent)
    assert first["X-Gitlab-Event-UUID"] == second["X-Gitlab-Event-UUID"]
    assert first["Idempotency-Key"] != second["Idempotency-Key"]
    assert {first["X-Gitlab-Event"], second["X-Gitlab-Event"]} == {"Issue Hook", "Note Hook"}
    assert hooked.checked == [KEY, KEY]


def test_a_recursive_hook_carries_the_event_uuid_back(server: ForgeServer, hooked: Hooked) -> None:
    """A receiver that writes back with the header it got makes a recursive hook: GitLab sends
    it with the same X-Gitlab-Event-UUID; its body differs, so it is a delivery of its own."""
    server.world.add_thread("gitlab", REPO, title="t")
    write_note(server, "first")
    assert hooked.answers(1) == [202]
    event = hooked.sender.sent[0].headers["X-Gitlab-Event-UUID"]
    write_note(server, "answer from an integration", **{"X-Gitlab-Event-UUID": event})
    assert hooked.answers(2) == [202, 202]
    assert hooked.sender.sent[1].headers["X-Gitlab-Event-UUID"] == event


def test_a_resent_delivery_is_a_repeat(server: ForgeServer, hooked: Hooked) -> None:
    server.world.add_thread("gitlab", REPO, title="t")
    write_note(server, "once")
    assert hooked.answers(1) == [202]
    hooked.sender.resend(0)  # "Resend request": same body, same Idempotency-Key
    assert hooked.answers(2) == [202, 409]
    assert hooked.checked == [KEY]


@pytest.mark.parametrize("hooked", [(14, 0)], indirect=True)
def test_gitlab_without_delivery_headers_is_heard(server: ForgeServer, hooked: Hooked) -> None:
    server.world.add_thread("gitlab", REPO, title="t")
    write_note(server, 'Please have a look.\n/label ~"coding agent"')
    assert hooked.answers(2) == [202, 202]  # was 400 for each
    for delivery in hooked.sender.sent:
        assert not {"X-Gitlab-Event-UUID", "Idempotency-Key"} & set(delivery.headers)
        assert json.loads(delivery.body)["project"]["path_with_namespace"] == REPO
    hooked.sender.resend(1)
    assert hooked.answers(3) == [202, 202, 409]  # the body tells a repeat


def test_webhook_uuid_is_new_for_every_request_sent(
    server: ForgeServer, hooked: Hooked, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a delivery id: a resend gets a new one (web_hook_service.rb, `build_headers`)."""
    seen: list[str] = []
    original = requests.post

    def spy(url: str, **kwargs: Any) -> requests.Response:
        seen.append(str(kwargs["headers"]["X-Gitlab-Webhook-UUID"]))
        return original(url, **kwargs)

    monkeypatch.setattr(requests, "post", spy)  # what the sender puts on the wire
    server.world.add_thread("gitlab", REPO, title="t")
    write_note(server, "once")
    hooked.answers(1)
    hooked.sender.resend(0)
    hooked.answers(2)
    assert len(seen) == 2 and seen[0] != seen[1]
