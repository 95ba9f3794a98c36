"""The database schema: numbered SQL files shipped in `bot/store/migrations`, applied in order.

Each migration runs in its own transaction under an advisory lock, and the version is read again
under that lock: two daemons (or two `bot db migrate`) running at once apply each one once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bot.store.errors import StateError

MIGRATIONS = Path(__file__).parent / "migrations"
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_LOCK = 0x626F745F6D6967  # "bot_mig": the advisory lock every migration takes
_TABLE = """CREATE TABLE IF NOT EXISTS schema_version (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now()
)"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path


def shipped() -> list[Migration]:
    found = []
    for path in sorted(MIGRATIONS.glob("*.sql")):
        match = _NAME.match(path.name)
        if match is not None:
            found.append(Migration(int(match.group(1)), path.stem, path))
    return found


def latest() -> int:
    return max((m.version for m in shipped()), default=0)


def current(conn: psycopg.Connection[Any]) -> int:
    """The database's schema version (0: never migrated)."""
    row = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return 0
    version = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()
    return int(version[0]) if version else 0


def migrate(conn: psycopg.Connection[Any]) -> list[str]:
    """Apply the shipped migrations the database lacks; their names. `conn` is autocommit."""
    applied: list[str] = []
    for migration in shipped():
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            conn.execute(_TABLE)
            if current(conn) >= migration.version:
                continue
            conn.execute(migration.path.read_text(encoding="utf-8").encode())
            conn.execute(
                "INSERT INTO schema_version (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
        applied.append(migration.name)
    return applied


def check(conn: psycopg.Connection[Any], where: str) -> None:
    """StateError, with the fix, unless the database has exactly the schema this bot knows."""
    have, need = current(conn), latest()
    if have < need:
        raise StateError(
            f"database {where}: schema is version {have}, this bot needs {need}:"
            " run `bot db migrate -c <config>`"
        )
    if have > need:
        raise StateError(
            f"database {where}: schema is version {have}, written by a newer bot (this one"
            f" knows up to version {need}); upgrade this one"
        )
