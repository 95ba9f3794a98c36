"""The listeners the configuration asks for: the webhooks (`webhooks.listen`), the task page
(`ui.listen`), or one listener for both when the two addresses are the same text (the
webhooks answer `/webhooks/...`, the page every other path, behind its own password).

Nothing is bound here: each `Planned.open()` binds (a taken port raises OSError there, which
the composition root turns into an exit 2 naming `key`).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass

from bot.core.config import Settings
from bot.service.listener import Listener, Routes
from bot.service.ui.wsgi import PageApp
from bot.service.webhooks.server import WebhookApp, WebhookServer

PAGE_MAX_BODY = 64 * 1024  # the page reads no body; waitress refuses larger ones itself
WEBHOOK_PATHS = "/webhooks/"


@dataclass(frozen=True)
class Planned:
    key: str  # the configuration key of its address, for the error when it cannot bind
    listen: str
    open: Callable[[], Listener]


def plan_listeners(
    settings: Settings,
    hooks: WebhookApp | None,
    page: PageApp | None,
    *,
    page_socket: socket.socket | None = None,
) -> list[Planned]:
    """`page_socket`: a bound socket for the page (the sandbox's), instead of `ui.listen`."""
    hooks_at = settings.webhooks.listen if hooks is not None and settings.webhooks else None
    page_at = settings.ui.listen if page is not None and settings.ui else None
    planned: list[Planned] = []
    if hooks is not None and hooks_at is not None and page is not None and hooks_at == page_at:
        both = Routes([(WEBHOOK_PATHS, hooks)], default=page)
        size = max(hooks.max_body * 4, PAGE_MAX_BODY)

        def shared() -> Listener:
            return Listener(both, hooks_at, serves=("webhooks", "ui"), max_body=size)

        return [Planned("ui.listen", hooks_at, shared)]
    if hooks is not None and hooks_at is not None:
        planned.append(Planned("webhooks.listen", hooks_at, lambda: WebhookServer(hooks, hooks_at)))
    if page is not None and page_at is not None:

        def alone() -> Listener:
            return Listener(page, page_at, serves=("ui",), max_body=PAGE_MAX_BODY, sock=page_socket)

        planned.append(Planned("ui.listen", page_at, alone))
    return planned
