"""The store the configuration asks for."""

from __future__ import annotations

import os
import socket

from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.config import Settings
from bot.store.base import Store
from bot.store.files import FileStore


def build_store(settings: Settings, clock: Clock = SYSTEM_CLOCK) -> Store:
    """The configured backend, not opened yet (`Store.open` takes it for a daemon); `clock`
    stamps the states' `updated_at`."""
    config = settings.store
    if config.backend == "files":
        return FileStore(settings.state_dir, clock)
    from bot.store.postgres import PostgresStore  # psycopg is imported only when configured

    assert config.dsn is not None  # the settings validator requires it
    return PostgresStore(
        config.dsn.get_secret_value(),
        lease_seconds=config.lease_seconds,
        pool_size=config.pool_size or settings.max_concurrent_tasks + 3,
        connect_seconds=config.connect_seconds,
        clock=clock,
    )


def daemon_name(settings: Settings) -> str:
    """This daemon's name in leases: configured, or host name and process id."""
    return settings.store.name or f"{socket.gethostname()}:{os.getpid()}"
