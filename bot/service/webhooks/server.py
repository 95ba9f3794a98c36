"""The webhook listener: waitress (a production WSGI server) and a small WSGI application.

Answers: 202 accepted (or ignored: an event about no thread), 401 unsigned or mis-signed,
404 unknown path or platform not configured, 405 not a POST, 409 replayed, 413 oversized,
400 malformed. Nothing is acted on before the signature is checked; only verified deliveries
enter the replay memory, so forged ones cannot evict real ones.

What makes a delivery a repeat (`_repeat_keys`): GitHub, its `X-GitHub-Delivery` or its body.
GitLab, its `Idempotency-Key` (sent since GitLab 17.4, "remains consistent across webhook
retries") or its body. GitLab's `X-Gitlab-Event-UUID` is not a delivery id: "Recursive webhooks
have the same value" (docs.gitlab.com/user/project/integrations/webhooks, "Delivery headers"),
and one request that fires several events (a note whose quick action sets a label) gives each
hook one UUID for all of them (lib/gitlab/web_hooks/recursion_detection/uuid.rb,
`new_uuids_for_hooks[hook.id] ||= SecureRandom.uuid`). `X-Gitlab-Webhook-UUID` is a fresh UUID
per request, retries included (app/services/web_hook_service.rb, `build_headers`). Versions
before these headers send none: not an error.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.core.log import get_logger
from bot.model.thread import Platform, TaskKey
from bot.service.listener import Listener
from bot.service.webhooks.events import thread_of
from bot.service.webhooks.verify import verify_github, verify_gitlab
from bot.store.base import DeliveryMemory
from bot.store.seen import SeenDeliveries

log = get_logger(__name__)
Environ = dict[str, Any]
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class Rejection(StrEnum):
    UNSIGNED = "unsigned"
    BAD_SIGNATURE = "bad_signature"
    OVERSIZED = "oversized"
    REPLAYED = "replayed"
    MALFORMED = "malformed"


_STATUS = {
    Rejection.UNSIGNED: "401 Unauthorized",
    Rejection.BAD_SIGNATURE: "401 Unauthorized",
    Rejection.OVERSIZED: "413 Payload Too Large",
    Rejection.REPLAYED: "409 Conflict",
    Rejection.MALFORMED: "400 Bad Request",
}


@dataclass
class WebhookApp:
    secrets: dict[Platform, bytes]
    on_thread: Callable[[TaskKey], None]
    seen: DeliveryMemory = field(default_factory=SeenDeliveries)
    max_body: int = 1024 * 1024
    rejected: Counter[str] = field(default_factory=Counter)
    accepted: Counter[str] = field(default_factory=Counter)

    def __call__(self, environ: Environ, start: StartResponse) -> Iterable[bytes]:
        platform = _platform(environ.get("PATH_INFO", ""))
        if platform is None or platform not in self.secrets:
            return _answer(start, "404 Not Found", "unknown webhook path")
        if environ.get("REQUEST_METHOD") != "POST":
            return _answer(start, "405 Method Not Allowed", "POST only")
        outcome = self._handle(platform, environ)
        if isinstance(outcome, Rejection):
            self.rejected[outcome.value] += 1
            log.warning("webhook_rejected", platform=platform.value, reason=outcome.value)
            return _answer(start, _STATUS[outcome], outcome.value)
        self.accepted[platform.value] += 1
        return _answer(start, "202 Accepted", outcome)

    def _handle(self, platform: Platform, environ: Environ) -> Rejection | str:
        length = _length(environ)
        if length is None or length > self.max_body:
            return Rejection.OVERSIZED if length else Rejection.MALFORMED
        body = environ["wsgi.input"].read(length)
        if not self._verified(platform, environ, body):
            return (
                Rejection.UNSIGNED
                if not _auth_header(platform, environ)
                else (Rejection.BAD_SIGNATURE)
            )
        keys = _repeat_keys(platform, environ, body)
        if keys is None:
            return Rejection.MALFORMED
        try:
            payload = json.loads(body)
        except ValueError:
            return Rejection.MALFORMED
        if not self.seen.add_all(*keys):
            return Rejection.REPLAYED
        delivery = _delivery_id(platform, environ)
        key = thread_of(platform, environ.get("HTTP_X_GITHUB_EVENT", ""), payload)
        if key is None:
            return "ignored"
        log.info("webhook_accepted", platform=platform.value, task=str(key), delivery=delivery)
        self.on_thread(key)
        return "accepted"

    def _verified(self, platform: Platform, environ: Environ, body: bytes) -> bool:
        header = _auth_header(platform, environ)
        if platform is Platform.GITHUB:
            return verify_github(self.secrets[platform], body, header)
        return verify_gitlab(self.secrets[platform], header)


class WebhookServer(Listener):
    """Serves `WebhookApp` on host:port in a background thread."""

    def __init__(self, app: WebhookApp, listen: str, threads: int = 4) -> None:
        # Waitress buffers a body before the app sees it; past 4x our limit it refuses it
        # itself (uncounted), below that the app refuses and counts it.
        super().__init__(
            app, listen, serves=("webhooks",), max_body=app.max_body * 4, threads=threads
        )
        self.app = app

    def start(self) -> WebhookServer:
        super().start()
        return self


def _platform(path: str) -> Platform | None:
    for platform in Platform:
        if path.rstrip("/") == f"/webhooks/{platform.value}":
            return platform
    return None


def _length(environ: Environ) -> int | None:
    try:
        return int(environ.get("CONTENT_LENGTH") or 0) or None
    except ValueError:
        return None


def _auth_header(platform: Platform, environ: Environ) -> str | None:
    name = "HTTP_X_HUB_SIGNATURE_256" if platform is Platform.GITHUB else "HTTP_X_GITLAB_TOKEN"
    value = environ.get(name)
    return str(value) if value else None


def _header(environ: Environ, name: str) -> str:
    return str(environ.get(name) or "").strip()[:200]


def _repeat_keys(platform: Platform, environ: Environ, body: bytes) -> list[str] | None:
    """What a repeat of this delivery would share with it (None: a GitHub delivery without
    its id, malformed). The body's digest is always one: the signature (GitHub) covers the
    body only, so a captured delivery sent again under a new id is still a repeat."""
    digest = "sha256:" + hashlib.sha256(platform.value.encode() + b"\0" + body).hexdigest()
    if platform is Platform.GITHUB:
        delivery = _header(environ, "HTTP_X_GITHUB_DELIVERY")
        return [delivery, digest] if delivery else None
    # Prefixed: GitLab's key and a GitHub delivery id live in one memory.
    idempotency = _header(environ, "HTTP_IDEMPOTENCY_KEY")
    return [f"gitlab-idempotency:{idempotency}", digest] if idempotency else [digest]


def _delivery_id(platform: Platform, environ: Environ) -> str:
    """The id logged with an accepted delivery (empty when the forge sent none)."""
    if platform is Platform.GITHUB:
        return _header(environ, "HTTP_X_GITHUB_DELIVERY")
    return _header(environ, "HTTP_IDEMPOTENCY_KEY") or _header(environ, "HTTP_X_GITLAB_EVENT_UUID")


def _answer(start: StartResponse, status: str, text: str) -> list[bytes]:
    body = (text + "\n").encode()
    start(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
