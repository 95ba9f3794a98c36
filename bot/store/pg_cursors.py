"""Discovery cursors in the database: one row per name, written whole (`discovery_cursors`)."""

from __future__ import annotations

from bot.store.pg_pool import Pool

_READ = "SELECT value FROM discovery_cursors WHERE name = %s"
_SAVE = """
INSERT INTO discovery_cursors (name, value) VALUES (%s, %s)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = now()
"""


def read(pool: Pool, name: str) -> str | None:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT value FROM discovery_cursors WHERE name = %s", (name,)
        ).fetchone()
    return None if row is None else str(row[0])


def save(pool: Pool, name: str, value: str) -> None:
    with pool.connection() as conn:
        conn.execute(_SAVE, (name, value))
