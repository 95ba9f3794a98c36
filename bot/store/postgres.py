"""The PostgreSQL backend of `Store` (being written: see issue 13)."""

from __future__ import annotations


class PostgresStore:
    def __init__(self, dsn: str, *, lease_seconds: float, pool_size: int) -> None:
        raise NotImplementedError("the postgres backend is not written yet")
