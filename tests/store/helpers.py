"""Stores of both backends for the store tests."""

from __future__ import annotations

from pathlib import Path

import psycopg

from bot.model.state import Status, TaskState
from bot.model.thread import TaskKey
from bot.store import schema
from bot.store.files import FileStore
from bot.store.postgres import PostgresStore

KEY = TaskKey.parse("github:acme/app#1")


def migrated(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        schema.migrate(conn)
    return dsn


def pg_store(dsn: str, daemon: str = "d1", lease_seconds: float = 30) -> PostgresStore:
    store = PostgresStore(dsn, lease_seconds=lease_seconds, pool_size=4)
    store.open(daemon)
    return store


def file_store(root: Path) -> FileStore:
    store = FileStore(root)
    store.open("files")
    return store


def state(key: TaskKey | str = KEY, status: Status = Status.RUNNING, **fields: object) -> TaskState:
    return TaskState(key=str(key), status=status, **fields)  # type: ignore[arg-type]


def sql(dsn: str, query: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(query.encode(), params or None)
        return cursor.fetchall() if cursor.description else []
