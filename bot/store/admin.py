"""`bot db ...`: the database's schema, and moving tasks between a state dir and the database.

Each raises StateError naming the problem (never the password); the CLI prints it and exits 2.
Import and export take the state dir's daemon lock: no daemon may run on it meanwhile.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from bot.core.config import Settings
from bot.store import schema
from bot.store.errors import StateError
from bot.store.files import FileStore
from bot.store.postgres import PostgresStore
from bot.store.transfer import copy_store

ADMIN = "bot-db"  # the daemon name of these commands in leases


def database(settings: Settings) -> PostgresStore:
    """The configured database, not opened yet."""
    config = settings.store
    if config.backend != "postgres" or config.dsn is None:
        raise StateError(
            "store.backend is files in this configuration: `bot db` needs store.backend"
            " postgres and store.dsn"
        )
    return PostgresStore(
        config.dsn.get_secret_value(), lease_seconds=config.lease_seconds, pool_size=2
    )


def migrate(settings: Settings) -> tuple[list[str], int]:
    """Apply the migrations the database lacks: their names, and the version it is at now."""
    store = database(settings)
    assert settings.store.dsn is not None
    try:
        with psycopg.connect(
            settings.store.dsn.get_secret_value(), autocommit=True, connect_timeout=15
        ) as conn:
            return schema.migrate(conn), schema.current(conn)
    except psycopg.Error as exc:
        raise StateError(f"cannot migrate database {store.where}: {store.scrub(exc)}") from None


def import_files(settings: Settings, state_dir: Path) -> tuple[int, str]:
    """Copy every task of `state_dir` into the database: how many, and where to."""
    return _copy(FileStore(state_dir), database(settings), to_database=True)


def export_files(settings: Settings, state_dir: Path) -> tuple[int, str]:
    """Copy every task of the database into `state_dir`: how many, and where from."""
    return _copy(FileStore(state_dir), database(settings), to_database=False)


def _copy(files: FileStore, db: PostgresStore, *, to_database: bool) -> tuple[int, str]:
    if to_database and not (files.root / "tasks").is_dir():
        raise StateError(f"{files.root} holds no tasks (no tasks/ directory): nothing to import")
    files.open(ADMIN)
    try:
        db.open(ADMIN)
        try:
            copied = copy_store(files, db) if to_database else copy_store(db, files)
        finally:
            db.close()
    finally:
        files.close()
    return copied, db.where
