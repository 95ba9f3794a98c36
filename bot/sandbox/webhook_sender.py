"""The emulator's webhooks: signed deliveries for what people do, as the forges send them.

GitHub: `X-GitHub-Event` (issues, pull_request, issue_comment), `X-GitHub-Delivery` (a GUID),
`X-Hub-Signature-256` (HMAC-SHA256 of the body; docs.github.com/webhooks/webhook-events-and-
payloads). GitLab: `X-Gitlab-Event` (Issue Hook, Merge Request Hook, Note Hook), `X-Gitlab-Token`
(the secret token as configured), `X-Gitlab-Event-UUID` (docs.gitlab.com/user/project/
integrations/webhook_events). Payloads carry the fields receivers key on; deliveries leave from
a background thread, never under the world lock.
"""

from __future__ import annotations

import json
import queue
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

import requests

from bot.sandbox.world import SThread, World
from bot.webhooks.verify import github_signature


@dataclass(frozen=True)
class Target:
    url: str
    secret: bytes


@dataclass
class WebhookSender:
    world: World
    targets: dict[str, Target]  # platform -> where its deliveries go
    statuses: list[int] = field(default_factory=list)
    _queue: queue.Queue[tuple[str, dict[str, str], bytes] | None] = field(
        default_factory=queue.Queue
    )

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
            headers = {
                "X-Gitlab-Event": event,
                "X-Gitlab-Token": target.secret.decode(),
                "X-Gitlab-Event-UUID": str(uuid.uuid4()),
            }
        headers["Content-Type"] = "application/json"
        self._queue.put((target.url, headers, body))

    def _deliver(self) -> None:
        while (item := self._queue.get()) is not None:
            url, headers, body = item
            try:
                status = requests.post(url, data=body, headers=headers, timeout=10).status_code
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
