"""Fixtures of the store tests: a migrated database, and two daemons' stores on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bot.store.postgres import PostgresStore
from tests.store.helpers import migrated, pg_store


@pytest.fixture
def db(pg_dsn: str) -> str:
    return migrated(pg_dsn)


@pytest.fixture
def two(db: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    first, second = pg_store(db, "d1"), pg_store(db, "d2")
    yield first, second
    first.close()
    second.close()
