"""The webhook listener over real HTTP: only verified, fresh, bounded deliveries are acted on."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from bot.model.thread import Kind, Platform, TaskKey
from bot.service.webhooks.server import WebhookApp, WebhookServer
from bot.service.webhooks.verify import github_signature
from bot.store.seen import SeenDeliveries

GH_SECRET = b"gh-webhook-secret"
GL_SECRET = b"gl-webhook-secret"


class Listener:
    def __init__(self, tmp_path: Path) -> None:
        self.checked: list[TaskKey] = []
        self.app = WebhookApp(
            {Platform.GITHUB: GH_SECRET, Platform.GITLAB: GL_SECRET},
            self.checked.append,
            SeenDeliveries(tmp_path / "seen"),
            max_body=64 * 1024,
        )
        self.server = WebhookServer(self.app, "127.0.0.1:0").start()

    def github(
        self, event: str, payload: Any, *, secret: bytes | None = GH_SECRET, delivery: str = ""
    ) -> requests.Response:
        body = json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
            "Content-Type": "application/json",
        }
        if secret is not None:
            headers["X-Hub-Signature-256"] = github_signature(secret, body)
        return requests.post(f"{self.server.url}/webhooks/github", data=body, headers=headers)

    def gitlab(
        self,
        payload: Any,
        *,
        token: str | None = GL_SECRET.decode(),
        delivery: str = "",
        headers: dict[str, str] | None = None,
    ) -> requests.Response:
        """`headers`: GitLab's delivery headers as sent (replacing the default Event-UUID)."""
        headers = dict(headers) if headers is not None else {}
        if not headers:
            headers["X-Gitlab-Event-UUID"] = delivery or str(uuid.uuid4())
        if token is not None:
            headers["X-Gitlab-Token"] = token
        return requests.post(f"{self.server.url}/webhooks/gitlab", json=payload, headers=headers)


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[Listener]:
    lst = Listener(tmp_path)
    yield lst
    lst.server.stop()


REPO = {"full_name": "acme/app"}


def test_signed_github_events_name_their_thread(listener: Listener) -> None:
    comment_on_pull = {"issue": {"number": 7, "pull_request": {}}, "repository": REPO}
    assert (
        listener.github("issues", {"issue": {"number": 3}, "repository": REPO}).status_code == 202
    )
    assert listener.github("issue_comment", comment_on_pull).status_code == 202
    review = {"pull_request": {"number": 9}, "repository": REPO, "review": {}}
    assert listener.github("pull_request_review", review).status_code == 202
    ignored = listener.github("push", {"repository": REPO})
    assert (ignored.status_code, ignored.text.strip()) == (202, "ignored")
    assert listener.checked == [
        TaskKey(Platform.GITHUB, "acme/app", Kind.ISSUE, 3),
        TaskKey(Platform.GITHUB, "acme/app", Kind.PULL, 7),
        TaskKey(Platform.GITHUB, "acme/app", Kind.PULL, 9),
    ]


def test_gitlab_notes_and_merge_requests(listener: Listener) -> None:
    project = {"path_with_namespace": "group/proj"}
    note = {
        "object_kind": "note",
        "project": project,
        "object_attributes": {"noteable_type": "MergeRequest"},
        "merge_request": {"iid": 4},
    }
    assert listener.gitlab(note).status_code == 202
    issue = {"object_kind": "issue", "project": project, "object_attributes": {"iid": 2}}
    assert listener.gitlab(issue).status_code == 202
    assert listener.checked == [
        TaskKey(Platform.GITLAB, "group/proj", Kind.MERGE_REQUEST, 4),
        TaskKey(Platform.GITLAB, "group/proj", Kind.ISSUE, 2),
    ]


def test_forged_unsigned_replayed_and_oversized_deliveries_are_refused(
    listener: Listener,
) -> None:
    payload = {"issue": {"number": 3}, "repository": REPO}
    assert listener.github("issues", payload, secret=None).status_code == 401
    assert listener.github("issues", payload, secret=b"guessed").status_code == 401
    assert listener.gitlab({"object_kind": "issue"}, token="guessed").status_code == 401
    assert listener.gitlab({"object_kind": "issue"}, token=None).status_code == 401
    delivery = str(uuid.uuid4())
    assert listener.github("issues", payload, delivery=delivery).status_code == 202
    assert listener.github("issues", payload, delivery=delivery).status_code == 409
    big = {"issue": {"number": 3}, "repository": REPO, "pad": "x" * 100_000}
    assert listener.github("issues", big).status_code == 413
    assert listener.checked == [TaskKey(Platform.GITHUB, "acme/app", Kind.ISSUE, 3)]
    assert listener.app.rejected == {
        "unsigned": 2,
        "bad_signature": 2,
        "replayed": 1,
        "oversized": 1,
    }


def test_a_forged_delivery_cannot_burn_a_real_delivery_id(listener: Listener) -> None:
    payload = {"issue": {"number": 5}, "repository": REPO}
    delivery = str(uuid.uuid4())
    assert (
        listener.github("issues", payload, secret=b"forged", delivery=delivery).status_code == 401
    )
    assert listener.github("issues", payload, delivery=delivery).status_code == 202


def test_replays_are_refused_after_a_restart(tmp_path: Path) -> None:
    first = Listener(tmp_path)
    delivery = str(uuid.uuid4())
    payload = {"issue": {"number": 3}, "repository": REPO}
    try:
        assert first.github("issues", payload, delivery=delivery).status_code == 202
    finally:
        first.server.stop()
    second = Listener(tmp_path)
    try:
        assert second.github("issues", payload, delivery=delivery).status_code == 409
    finally:
        second.server.stop()


def test_unknown_paths_and_methods(listener: Listener) -> None:
    assert requests.post(f"{listener.server.url}/webhooks/bitbucket", data=b"{}").status_code == 404
    assert requests.get(f"{listener.server.url}/webhooks/github").status_code == 405


def test_a_captured_delivery_sent_again_under_a_new_id_is_a_replay(listener: Listener) -> None:
    """The signature covers the body only: a new X-GitHub-Delivery must not make it fresh
    (found by the attack review)."""
    payload = {"issue": {"number": 8}, "repository": REPO}
    assert listener.github("issues", payload).status_code == 202
    assert listener.github("issues", payload).status_code == 409  # same body, new id
    assert listener.checked == [TaskKey(Platform.GITHUB, "acme/app", Kind.ISSUE, 8)]


def gitlab_note(iid: int, text: str) -> dict[str, Any]:
    return {
        "object_kind": "note",
        "project": {"path_with_namespace": "group/proj"},
        "object_attributes": {"noteable_type": "Issue", "note": text},
        "issue": {"iid": iid},
    }


def test_gitlab_recursive_deliveries_sharing_an_event_uuid_are_all_accepted(
    listener: Listener,
) -> None:
    """GitLab gives recursive hooks, and every event of one request, one X-Gitlab-Event-UUID:
    it is not a delivery id (found by the review of issue 19: the second was refused)."""
    event = str(uuid.uuid4())
    for text in ("first", "second"):
        headers = {
            "X-Gitlab-Event-UUID": event,
            "X-Gitlab-Webhook-UUID": str(uuid.uuid4()),
            "Idempotency-Key": str(uuid.uuid4()),
        }
        assert listener.gitlab(gitlab_note(5, text), headers=headers).status_code == 202
    # Without an Idempotency-Key (GitLab before 17.4), the Event-UUID alone still refuses none.
    for text in ("third", "fourth"):
        headers = {"X-Gitlab-Event-UUID": event}
        assert listener.gitlab(gitlab_note(5, text), headers=headers).status_code == 202
    assert len(listener.checked) == 4


def test_gitlab_retry_with_the_same_idempotency_key_is_a_repeat(listener: Listener) -> None:
    key = str(uuid.uuid4())
    first = {"Idempotency-Key": key, "X-Gitlab-Webhook-UUID": str(uuid.uuid4())}
    assert listener.gitlab(gitlab_note(6, "once"), headers=first).status_code == 202
    # A retry carries the same key and a new Webhook-UUID; even with another body (a custom
    # template rendered again) it is the same delivery.
    retry = {"Idempotency-Key": key, "X-Gitlab-Webhook-UUID": str(uuid.uuid4())}
    assert listener.gitlab(gitlab_note(6, "once, again"), headers=retry).status_code == 409
    # The same body under a new key is a repeat too (a captured delivery sent again).
    again = {"Idempotency-Key": str(uuid.uuid4())}
    assert listener.gitlab(gitlab_note(6, "once"), headers=again).status_code == 409
    assert listener.checked == [TaskKey(Platform.GITLAB, "group/proj", Kind.ISSUE, 6)]
    assert listener.app.rejected == {"replayed": 2}


def test_gitlab_delivery_without_any_id_header_is_accepted(listener: Listener) -> None:
    """GitLab before 14.8 sends no X-Gitlab-Event-UUID: no 400, the body decides."""
    body = json.dumps(gitlab_note(7, "old gitlab")).encode()
    headers = {"X-Gitlab-Token": GL_SECRET.decode(), "Content-Type": "application/json"}
    url = f"{listener.server.url}/webhooks/gitlab"
    assert requests.post(url, data=body, headers=headers).status_code == 202
    assert requests.post(url, data=body, headers=headers).status_code == 409  # its repeat
    assert listener.checked == [TaskKey(Platform.GITLAB, "group/proj", Kind.ISSUE, 7)]
