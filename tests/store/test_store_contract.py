"""The `Store` contract, run against both backends (files and postgres)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from bot.model.state import Allowance, Cap, Status, TaskState
from bot.model.thread import TaskKey
from bot.store import schema
from bot.store.base import QueuedJob, Store
from bot.store.errors import LeaseLost, StateError, TaskBusy
from bot.store.files import FileStore
from bot.store.pg_lease import claim
from bot.store.pg_queue import PgDeliveries
from bot.store.postgres import PostgresStore
from bot.store.transfer import copy_store
from tests.store.helpers import KEY, file_store, migrated, pg_store, sql, state


@pytest.fixture(params=["files", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Store]:
    opened: Store
    if backend == "files":
        opened = file_store(tmp_path / "state")
    else:
        opened = pg_store(migrated(request.getfixturevalue("pg_dsn")))
    yield opened
    opened.close()


def corrupt(store: Store, key: str) -> None:
    """A task whose stored state is no TaskState (an edit by hand, a bad restore)."""
    if isinstance(store, FileStore):
        path = store.task_dir(state(key).task_key()) / "task.json"
        path.parent.mkdir(parents=True)
        path.write_text('{"key": 5}')
    else:
        assert isinstance(store, PostgresStore)
        dsn = store._pool.conninfo
        bad = """INSERT INTO tasks (key, status, state) VALUES (%s, 'running', '{"key": 5}')"""
        sql(dsn, bad, key)


def test_save_load_round_trip(store: Store) -> None:
    assert store.load(KEY) is None
    saved = state(step=3, tool_journal={"c1": "done\u0000"}, changes={"a.py": "x = 1\n"})
    store.save(saved)
    loaded = store.load(KEY)
    assert loaded == saved
    loaded.step = 4
    store.save(loaded)
    assert store.load(KEY) == loaded
    assert store.all_states() == [loaded]


def test_a_task_paused_at_a_cap_keeps_its_cap_and_allowance_exactly(store: Store) -> None:
    """A restart reads the cap, when it was asked, and a resume's allowance to the last digit
    of its cost (issue 21: a cap asks; the comparison reads only the state)."""
    cost = Decimal("1.234567890123456789")
    saved = state(status=Status.PAUSED, step=7, capped=Cap.COST, asked_at="2026-01-02T03:04:05Z")
    saved.allowance = Allowance(steps=47, tokens=800_000, cost=cost)
    store.save(saved)
    loaded = store.load(KEY)
    assert loaded == saved and loaded.allowance.cost == cost
    assert loaded.capped is Cap.COST and loaded.asked_at == "2026-01-02T03:04:05Z"


def test_a_finished_task_keeps_its_changeset_apart(store: Store) -> None:
    done = state(status=Status.DONE, changes={"a.py": "x = 1\n", "gone.py": None})
    store.save(done)
    loaded = store.load(KEY)
    assert loaded is not None and loaded.changes == {}
    assert loaded.changes_file == "changes.run1.json"
    assert store.archived_changes(loaded) == {"a.py": "x = 1\n", "gone.py": None}
    # Handed back: a new run; the earlier run's changeset stays until pruned.
    store.save(state(run=2, changes={"b.py": "y\n"}))
    running = store.load(KEY)
    assert running is not None and store.archived_changes(running) == {"b.py": "y\n"}
    assert store.drop_old_runs(running, datetime.now(UTC) + timedelta(hours=1))[0] == 1


def test_conversation_append_archive_and_read(store: Store) -> None:
    store.save(state())
    talk = store.conversation(KEY)
    talk.append({"role": "user", "content": "日本語 \u0000 ok"})
    talk.append({"role": "assistant", "content": "two"})
    assert [e["content"] for e in store.conversation(KEY).entries()] == ["日本語 \u0000 ok", "two"]
    store.archive_run(KEY, 1)
    assert store.conversation(KEY).entries() == []
    archived = store.archived_conversation(KEY, 1)
    assert [e["content"] for e in archived] == ["日本語 \u0000 ok", "two"]
    store.conversation(KEY).append({"role": "user", "content": "run 2"})
    assert [e["content"] for e in store.conversation(KEY).entries()] == ["run 2"]
    assert store.archived_conversation(KEY, 7) == []


def test_index_counts_and_active_states(store: Store) -> None:
    statuses = [Status.RUNNING, Status.PAUSED, Status.DONE, Status.DONE, Status.FAILED]
    for n, status in enumerate(statuses, start=1):
        store.save(state(f"github:acme/app#{n}", status))
    index = store.index()
    view = index.refresh()
    assert view.counts() == {"running": 1, "paused": 1, "done": 2, "failed": 1}
    assert sorted(s.key for s in index.active_states(view)) == [
        "github:acme/app#1",
        "github:acme/app#2",
    ]
    store.save(state("github:acme/app#1", Status.STOPPED))
    assert index.refresh().counts()["stopped"] == 1


def test_second_claim_is_busy_until_released(store: Store) -> None:
    with store.task_lock(KEY) as lease:
        lease.check()
        with pytest.raises(TaskBusy), store.task_lock(KEY):
            pass
        store.save(state())  # an unfenced save leaves the lease alone
        with pytest.raises(TaskBusy), store.task_lock(KEY):
            pass
    with store.task_lock(KEY):
        pass


def test_fenced_writes_pass_while_the_lease_holds(store: Store) -> None:
    store.save(state())
    with store.task_lock(KEY) as lease:
        fenced = store.fenced(lease)
        fenced.save(state(step=9))
        fenced.conversation(KEY).append({"n": 1})
        fenced.archive_run(KEY, 1)
    loaded = store.load(KEY)
    assert loaded is not None and loaded.step == 9
    assert store.archived_conversation(KEY, 1) == [{"n": 1}]


def test_delivery_ids_all_or_nothing(store: Store) -> None:
    seen = store.deliveries()
    assert seen.add_all("d1", "sha:x")
    assert not seen.add_all("d2", "sha:x")  # a replayed body under a new id
    assert seen.add_all("d2")  # refused above: not recorded then
    assert not seen.add_all("d1")


def test_discovery_cursors_are_kept_whole_and_apart(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    def opened() -> Store:
        if backend == "files":
            return file_store(tmp_path / "state")
        return pg_store(migrated(request.getfixturevalue("pg_dsn")))

    name = "github-notifications:https://api.github.com:coding-bot"  # ':' and '/' in names
    value = '{"since": "2026-01-02T00:00:00Z", "note": "\u00e9t\u00e9"}'
    store = opened()
    try:
        assert store.discovery_cursor(name) is None
        store.save_discovery_cursor(name, '{"since": "2026-01-01T00:00:00Z"}')
        store.save_discovery_cursor("other", "x")
        store.save_discovery_cursor(name, value)
    finally:
        store.close()
    again = opened()  # a restart: another store over the same state reads what was saved
    try:
        assert again.discovery_cursor(name) == value
        assert again.discovery_cursor("other") == "x"
        assert again.discovery_cursor("github-notifications") is None
    finally:
        again.close()


def test_remove_and_drop_old_runs(store: Store) -> None:
    other = state("github:acme/app#2")
    store.save(other)
    store.save(state(status=Status.DONE, changes={"a": "1"}))
    store.conversation(KEY).append({"n": 1})
    store.archive_run(KEY, 1)
    store.save(state(run=2))
    store.conversation(KEY).append({"n": 2})
    current = store.load(KEY)
    assert current is not None
    assert store.drop_old_runs(current, datetime.now(UTC) - timedelta(hours=1)) == (0, 0)
    dropped, freed = store.drop_old_runs(current, datetime.now(UTC) + timedelta(hours=1), True)
    assert dropped == 2 and freed > 0
    assert store.archived_conversation(KEY, 1) == [{"n": 1}]  # a dry run
    assert store.drop_old_runs(current, datetime.now(UTC) + timedelta(hours=1))[0] == 2
    assert store.archived_conversation(KEY, 1) == []
    assert store.conversation(KEY).entries() == [{"n": 2}]
    with store.task_lock(KEY):
        assert store.remove(KEY, dry_run=True) > 0
        assert store.load(KEY) is not None
        assert store.remove(KEY) > 0
    assert store.load(KEY) is None
    assert store.conversation(KEY).entries() == []
    assert store.all_states() == [other]


def test_scan_names_an_unreadable_task(store: Store) -> None:
    store.save(state())
    corrupt(store, "github:acme/app#2")
    states, unreadable = store.scan()
    assert [s.key for s in states] == [str(KEY)]
    assert len(unreadable) == 1 and "acme" in unreadable[0].where
    assert "not a valid task state: key" in unreadable[0].reason


def test_files_fenced_is_the_store_itself(tmp_path: Path) -> None:
    store = file_store(tmp_path)
    with store.task_lock(KEY) as lease:
        assert store.fenced(lease) is store and lease.token == 0


# -- postgres: several daemons on one database ------------------------------------------------


def test_tokens_grow_with_every_claim(two: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = two
    tokens = []
    for n, store in enumerate([first, second, first, second], start=1):
        with store.task_lock(KEY if n % 2 else state("github:acme/app#2").task_key()) as lease:
            tokens.append(lease.token)
    assert tokens == sorted(tokens) and len(set(tokens)) == 4


def test_an_expired_lease_is_taken_over_and_fenced_out(
    two: tuple[PostgresStore, PostgresStore], db: str
) -> None:
    first, second = two
    first.save(state())
    with first.task_lock(KEY) as old:
        assert second.holders()[str(KEY)].daemon == "d1"
        stale = first.fenced(old)
        stale.conversation(KEY).append({"n": "before"})
        # A daemon frozen past its lease: its lease runs out (the database's clock decides).
        sql(db, "UPDATE tasks SET lease_expires = now() - interval '1 second'")
        with second.task_lock(KEY) as new:
            assert new.token > old.token
            assert second.holders()[str(KEY)].daemon == "d2"
            with pytest.raises(LeaseLost):
                stale.save(state(step=99))
            with pytest.raises(LeaseLost):
                stale.conversation(KEY).append({"n": "after"})
            with pytest.raises(LeaseLost):
                stale.archive_run(KEY, 1)
            with pytest.raises(LeaseLost):
                old.check()
            second.fenced(new).save(state(step=2))
        # The old holder's release does not free the task the new holder took.
    loaded = first.load(KEY)
    assert loaded is not None and loaded.step == 2
    assert first.conversation(KEY).entries() == [{"n": "before"}]
    assert first.archived_conversation(KEY, 1) == []


def test_a_lease_is_renewed_while_the_work_goes_on(db: str) -> None:
    first, second = pg_store(db, "d1", lease_seconds=1), pg_store(db, "d2", lease_seconds=1)
    try:
        with first.task_lock(KEY) as lease:
            time.sleep(1.3)  # past the lease: only the renewals keep it
            with pytest.raises(TaskBusy), second.task_lock(KEY):
                pass
            lease.check()
        with second.task_lock(KEY):
            pass
    finally:
        first.close()
        second.close()


def test_a_claim_never_renewed_expires_by_the_database_clock(db: str) -> None:
    first, second = pg_store(db, "d1", lease_seconds=1), pg_store(db, "d2")
    try:
        frozen = claim(first._pool, KEY, "d1", 1)  # no renewal thread: a frozen daemon
        with pytest.raises(TaskBusy), second.task_lock(KEY):
            pass
        time.sleep(1.2)
        with second.task_lock(KEY):
            with pytest.raises(LeaseLost):
                frozen.check()
            with pytest.raises(LeaseLost):
                first.fenced(frozen).save(state())
        assert second.load(KEY) is None
    finally:
        first.close()
        second.close()


def test_each_job_is_taken_once(two: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = two
    keys = [state(f"github:acme/app#{n}").task_key() for n in range(1, 41)]
    first.enqueue(QueuedJob(key, fresh=False) for key in keys)
    second.enqueue([QueuedJob(keys[0], fresh=True), QueuedJob(keys[1], fresh=False)])
    taken: list[QueuedJob] = []
    lock = threading.Lock()

    def taker(store: PostgresStore) -> None:
        while batch := store.take(3):
            with lock:
                taken.extend(batch)

    threads = [threading.Thread(target=taker, args=(s,)) for s in (first, second) * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(job.key for job in taken) == sorted(keys)
    assert {job.key: job.fresh for job in taken}[keys[0]] is True  # fresh is ORed


def test_jobs_of_held_tasks_are_not_handed_out(two: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = two
    held_key, free_key = KEY, state("github:acme/app#2").task_key()
    second.enqueue([QueuedJob(held_key, True), QueuedJob(free_key, True)])
    with first.task_lock(held_key):
        assert second.take(10) == [QueuedJob(free_key, True)]
    assert second.take(10) == []  # dropped: the next discovery plans it again if needed


def test_tasks_of_a_dead_daemon_are_handed_out_once_their_lease_expires(
    two: tuple[PostgresStore, PostgresStore], db: str
) -> None:
    first, second = two
    keys = {n: state(f"github:acme/app#{n}").task_key() for n in range(1, 7)}
    first.save(state(keys[1]))  # running: its daemon died mid-run
    first.save(state(keys[2], retry_at="2999-01-01T00:00:00Z"))  # backing off: not yet
    first.save(state(keys[3], Status.PAUSED))  # paused: the controls are for discovery
    first.save(state(keys[4]))  # running, released cleanly (SIGTERM): discovery resumes it
    first.save(state(keys[6]))  # running, its daemon alive
    dead = "UPDATE tasks SET lease_owner = 'dead', lease_token = 1, lease_expires = now() {}"
    sql(db, dead.format("- interval '1 second'") + " WHERE key <> %s", str(keys[4]))
    sql(db, dead.format("+ interval '1 hour'") + " WHERE key = %s", str(keys[6]))
    # Claimed, then killed before the first save: a lease row without state.
    sql(
        db,
        "INSERT INTO tasks (key, lease_owner, lease_token, lease_expires)"
        " VALUES (%s, 'dead', 2, now() - interval '1 second')",
        str(keys[5]),
    )
    taken = second.take(10)
    assert sorted(job.key for job in taken) == [keys[1], keys[5]]
    assert all(not job.fresh for job in taken)
    with second.task_lock(keys[1]):
        assert keys[1] not in [job.key for job in first.take(10)]  # held again: not an orphan


def test_one_leader_per_role_until_it_expires(two: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = two
    assert first.lead("discovery:github", 0.5)
    assert not second.lead("discovery:github", 0.5)
    assert second.lead("discovery:gitlab", 0.5)
    assert first.lead("discovery:github", 0.5)  # renewed by its holder
    time.sleep(0.6)
    assert second.lead("discovery:github", 10)
    assert not first.lead("discovery:github", 10)


def test_deliveries_are_shared_and_raced_once(two: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = two
    assert first.deliveries().add_all("a", "sha:1")
    assert not second.deliveries().add_all("b", "sha:1")
    assert second.deliveries().add_all("b")
    wins: list[bool] = []
    threads = [
        threading.Thread(target=lambda s=s: wins.append(s.deliveries().add_all("race", "x")))
        for s in (first, second) * 4
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(wins) == [False] * 7 + [True]


def test_deliveries_are_bounded(two: tuple[PostgresStore, PostgresStore], db: str) -> None:
    first, _ = two
    sql(db, "INSERT INTO deliveries SELECT 'old', now() - interval '31 days'")
    sql(db, "INSERT INTO deliveries SELECT 'n' || i, now() FROM generate_series(1, 10005) i")
    memory = first.deliveries()
    assert isinstance(memory, PgDeliveries)
    for n in range(PgDeliveries.TRIM_EVERY):
        memory.add_all(f"new{n}")
    assert sql(db, "SELECT count(*) FROM deliveries") == [(10_000,)]
    assert sql(db, "SELECT count(*) FROM deliveries WHERE id = 'old'") == [(0,)]
    assert sql(db, "SELECT count(*) FROM deliveries WHERE id = 'new99'") == [(1,)]


# -- postgres: schema -------------------------------------------------------------------------


def test_schema_older_or_newer_is_refused_with_the_fix(pg_dsn: str) -> None:
    dsn = f"{pg_dsn} password=s3cret-pw"  # trust auth ignores it: it only must not show
    with pytest.raises(StateError) as older:
        pg_store(dsn)
    assert f"schema is version 0, this bot needs {schema.latest()}" in str(older.value)
    assert "bot db migrate -c" in str(older.value)
    migrated(pg_dsn)
    pg_store(dsn).close()
    sql(pg_dsn, "INSERT INTO schema_version VALUES (999, '0999_future')")
    with pytest.raises(StateError) as newer:
        pg_store(dsn)
    assert "version 999" in str(newer.value) and "upgrade this one" in str(newer.value)
    unreachable = "host=/nonexistent port=5432 user=bot dbname=x password=s3cret-pw"
    store = PostgresStore(unreachable, lease_seconds=5, pool_size=1, connect_seconds=0.5)
    with pytest.raises(StateError) as away:
        store.open("d1")
    for message in (str(older.value), str(newer.value), str(away.value), store.where):
        assert "s3cret" not in message
    assert "/nonexistent" in str(away.value)


def test_concurrent_migrations_apply_each_once(pg_dsn: str) -> None:
    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(_migrate(pg_dsn))) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [[], [m.name for m in schema.shipped()]]  # 0001_initial, ...
    assert _migrate(pg_dsn) == []


def _migrate(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return schema.migrate(conn)


# -- copying between backends (bot db import / export) ----------------------------------------


def _fill(store: FileStore) -> None:
    """A running task, a paused one, and a finished one in its second run."""
    store.save(state("github:acme/app#1", step=2, changes={"a.py": "1\n"}))
    store.conversation(TaskKey.parse("github:acme/app#1")).append({"role": "user", "n": 1})
    store.save(state("gitlab:g/p!2", Status.PAUSED, tool_journal={"c": "r"}))
    third = TaskKey.parse("github:acme/app#3p")
    store.save(state(third, Status.DONE, changes={"x.py": "old\n"}))
    store.conversation(third).append({"run": 1})
    store.archive_run(third, 1)
    store.save(state(third, Status.DONE, run=2, changes={"x.py": "new\n", "y.py": None}))
    store.conversation(third).append({"run": 2})


def test_files_to_postgres_to_files_keeps_every_task(tmp_path: Path, db: str) -> None:
    source, back = file_store(tmp_path / "a"), file_store(tmp_path / "b")
    _fill(source)
    database = pg_store(db)
    try:
        assert copy_store(source, database) == 3
        assert copy_store(source, database) == 0  # the same again: nothing to do
        assert copy_store(database, back) == 3
        for original in source.all_states():
            key = original.task_key()
            assert back.export_task(key) == source.export_task(key) == database.export_task(key)
            assert back.load(key) == original  # updated_at included
        third = database.load(TaskKey.parse("github:acme/app#3p"))
        assert third is not None
        assert database.archived_changes(third) == {"x.py": "new\n", "y.py": None}
        assert database.archived_conversation(third.task_key(), 1) == [{"run": 1}]
        assert database.conversation(third.task_key()).entries() == [{"run": 2}]
        assert database.index().refresh().counts() == {"running": 1, "paused": 1, "done": 1}
    finally:
        database.close()


def test_a_copy_never_overwrites_a_different_task(tmp_path: Path, db: str) -> None:
    source = file_store(tmp_path / "a")
    _fill(source)
    database = pg_store(db)
    try:
        database.save(state("gitlab:g/p!2", Status.RUNNING))
        with pytest.raises(StateError, match=r"task gitlab:g/p!2 is already in"):
            copy_store(source, database)
        assert [s.key for s in database.all_states()] == ["gitlab:g/p!2"]  # nothing copied
    finally:
        database.close()


def test_database_errors_are_state_errors_without_the_password(db: str) -> None:
    store = pg_store(f"{db} password=s3cret-pw")
    try:
        sql(db, "DROP TABLE jobs")
        with pytest.raises(StateError, match=r"database .*jobs") as failed:
            store.take(1)
        assert "s3cret" not in str(failed.value)
        assert store.load(KEY) is None  # the pool is still usable
    finally:
        store.close()


def test_a_lone_surrogate_in_the_state_itself_is_saved_as_a_replacement_character(
    store: Store,
) -> None:
    """A model's answer or a comment quoted in the state may carry a cut emoji; the task must
    still be saved (and read back) rather than fail at every cycle."""
    key = TaskKey.parse("github:acme/app#7")
    store.save(TaskState(key=str(key), final_answer="done \ud83d", changes={"a.txt": "x\udc80"}))
    loaded = store.load(key)
    assert loaded is not None
    assert loaded.final_answer == "done \ufffd" and loaded.changes == {"a.txt": "x\ufffd"}
