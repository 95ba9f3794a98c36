"""The emulator's webhooks: signed deliveries for what people do, as the forges send them.

GitHub: `X-GitHub-Event` (issues, pull_request, issue_comment), `X-GitHub-Delivery` (a GUID,
kept by a redelivery), `X-Hub-Signature-256` (HMAC-SHA256 of the body; docs.github.com/webhooks/
webhook-events-and-payloads). GitLab: `X-Gitlab-Event` (Issue Hook, Merge Request Hook, Note
Hook), `X-Gitlab-Token` (the secret token as configured) and, by version (docs.gitlab.com/user/
project/integrations/webhooks, "Delivery headers"): `X-Gitlab-Event-UUID` since 14.8, one per
hook and request, shared by recursive hooks (bot_sandbox/hook_scope.py); `X-Gitlab-Webhook-UUID`
since 16.2, a fresh UUID for every request sent, retries included (app/services/
web_hook_service.rb, `build_headers`: `GITLAB_UUID_HEADER => SecureRandom.uuid`);
`Idempotency-Key` since 17.4, the same across retries of one delivery (the resend passes the
logged key back: `WebHookService.new(..., idempotency_key:)`). `gitlab_version` picks which are
sent. Payloads carry the fields receivers key on; deliveries leave from a background thread,
never under the world lock; `resend` sends one again as "Resend request" does.
"""

from __future__ import annotations

import json
import queue
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

import requests

from bot.service.webhooks.verify import github_signature
from bot_sandbox import hook_scope
from bot_sandbox.world import SThread, World


@dataclass(frozen=True)
class Target:
    url: str
    secret: bytes


# GitLab version that first sent each delivery header (docs, "Delivery headers").
EVENT_UUID_SINCE = (14, 8)
WEBHOOK_UUID_SINCE = (16, 2)
IDEMPOTENCY_KEY_SINCE = (17, 4)


@dataclass(frozen=True)
class Delivery:
    platform: str
    url: str
    headers: dict[str, str]
    body: bytes


@dataclass
class WebhookSender:
    world: World
    targets: dict[str, Target]  # platform -> where its deliveries go
    statuses: list[int] = field(default_factory=list)
    gitlab_version: tuple[int, int] = (17, 4)
    sent: list[Delivery] = field(default_factory=list)  # in the order they were made
    _queue: queue.Queue[Delivery | None] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        self.world.listeners.append(self._on_change)
        self._thread = threading.Thread(target=self._deliver, name="webhook-sender", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.world.listeners.remove(self._on_change)
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _on_change(self, platform: str, path: str, thread: SThread, what: str, actor: str) -> None:
        target = self.targets.get(platform)
        if target is None:
            return
        if platform == "github":
            event, payload = _github(path, thread, what, actor)
            body = json.dumps(payload).encode()
            headers = {
                "X-GitHub-Event": event,
                "X-GitHub-Delivery": str(uuid.uuid4()),
                "X-Hub-Signature-256": github_signature(target.secret, body),
            }
        else:
            event, payload = _gitlab(path, thread, what)
            body = json.dumps(payload).encode()
            headers = {"X-Gitlab-Event": event, "X-Gitlab-Token": target.secret.decode()}
            if self.gitlab_version >= EVENT_UUID_SINCE:
                headers["X-Gitlab-Event-UUID"] = hook_scope.current().event_uuid(target.url)
            if self.gitlab_version >= IDEMPOTENCY_KEY_SINCE:
                headers["Idempotency-Key"] = str(uuid.uuid4())
        headers["Content-Type"] = "application/json"
        delivery = Delivery(platform, target.url, headers, body)
        self.sent.append(delivery)
        self._queue.put(delivery)

    def resend(self, index: int) -> None:
        """Send delivery `index` of `sent` again, as a person's "Resend request" (GitLab) or
        "Redeliver" (GitHub) does: the same body, the same Idempotency-Key (GitLab) or
        X-GitHub-Delivery; GitLab's Event-UUID is the resending request's."""
        delivery = self.sent[index]
        headers = dict(delivery.headers)
        if delivery.platform == "gitlab" and "X-Gitlab-Event-UUID" in headers:
            headers["X-Gitlab-Event-UUID"] = hook_scope.current().event_uuid(delivery.url)
        self._queue.put(Delivery(delivery.platform, delivery.url, headers, delivery.body))

    def _deliver(self) -> None:
        while (item := self._queue.get()) is not None:
            headers = dict(item.headers)
            if item.platform == "gitlab" and self.gitlab_version >= WEBHOOK_UUID_SINCE:
                headers["X-Gitlab-Webhook-UUID"] = str(uuid.uuid4())  # per request sent
            try:
                response = requests.post(item.url, data=item.body, headers=headers, timeout=10)
                status = response.status_code
            except requests.RequestException:
                status = 0  # the receiver is down: the forge records a failed delivery
            self.statuses.append(status)


def _github(path: str, thread: SThread, what: str, actor: str) -> tuple[str, dict[str, Any]]:
    number = {
        "number": thread.number,
        "title": thread.title,
        "state": thread.state,
        "labels": [{"name": name} for name in thread.labels],
        "updated_at": thread.updated_at.isoformat(),
    }
    base: dict[str, Any] = {"repository": {"full_name": path}, "sender": {"login": actor}}
    if what == "comment":
        issue = {**number, **({"pull_request": {"url": ""}} if thread.kind == "pull" else {})}
        comment = thread.comments[-1]
        return "issue_comment", {
            **base,
            "action": "created",
            "issue": issue,
            "comment": {"id": comment.id, "body": comment.body},
        }
    action = {"labels": "labeled", "assigned": "assigned"}.get(what) or (
        "closed" if thread.state == "closed" else "reopened"
    )
    if thread.kind == "pull":
        return "pull_request", {**base, "action": action, "pull_request": number}
    return "issues", {**base, "action": action, "issue": number}


def _gitlab(path: str, thread: SThread, what: str) -> tuple[str, dict[str, Any]]:
    project = {"path_with_namespace": path}
    mr = thread.kind == "mr"
    iid = {
        "iid": thread.number,
        "title": thread.title,
        "updated_at": thread.updated_at.isoformat(),
        "labels": [{"title": name} for name in thread.labels],
    }
    if what == "comment":
        noteable = "MergeRequest" if mr else "Issue"
        return "Note Hook", {
            "object_kind": "note",
            "project": project,
            "object_attributes": {"noteable_type": noteable, "note": thread.comments[-1].body},
            ("merge_request" if mr else "issue"): iid,
        }
    kind = "merge_request" if mr else "issue"
    hook = "Merge Request Hook" if mr else "Issue Hook"
    return hook, {
        "object_kind": kind,
        "project": project,
        "object_attributes": {**iid, "action": "update"},
    }
