"""The listener the configuration asks for (or None), wired to a thread-check callback."""

from __future__ import annotations

from collections.abc import Callable

from bot.core.config import Settings
from bot.model.thread import Platform, TaskKey
from bot.service.webhooks.server import WebhookApp, WebhookServer
from bot.store.base import DeliveryMemory


def build_webhooks(
    settings: Settings, on_thread: Callable[[TaskKey], None], seen: DeliveryMemory
) -> WebhookServer | None:
    """`seen`: the store's memory of deliveries (shared by every daemon on one database)."""
    app = build_webhook_app(settings, on_thread, seen)
    if app is None or settings.webhooks is None:
        return None
    return WebhookServer(app, settings.webhooks.listen)


def build_webhook_app(
    settings: Settings, on_thread: Callable[[TaskKey], None], seen: DeliveryMemory
) -> WebhookApp | None:
    """The application alone, for a listener it shares with the task page."""
    hooks = settings.webhooks
    if hooks is None:
        return None
    secrets: dict[Platform, bytes] = {}
    if hooks.github_secret is not None and settings.github is not None:
        secrets[Platform.GITHUB] = hooks.github_secret.get_secret_value().encode()
    if hooks.gitlab_secret is not None and settings.gitlab is not None:
        secrets[Platform.GITLAB] = hooks.gitlab_secret.get_secret_value().encode()
    return WebhookApp(secrets, on_thread, seen, max_body=hooks.max_body_kb * 1024)
