"""The page the configuration asks for (or None), over the daemon's store."""

from __future__ import annotations

from bot.core.config import Settings
from bot.service.ui.auth import BasicAuth
from bot.service.ui.links import ForgeLinks
from bot.service.ui.wsgi import PageApp
from bot.store.base import Store


def build_page(settings: Settings, store: Store) -> PageApp | None:
    ui = settings.ui
    if ui is None:
        return None
    auth = BasicAuth(ui.password.get_secret_value()) if ui.password is not None else None
    return PageApp(store, ForgeLinks.from_settings(settings), settings.llm.price, auth)
