"""Adversarial tests of the postgres backend: inputs and interleavings that tried to break the
promises (one daemon per task, fenced side effects, nothing lost, no password shown)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.model.state import Status, TaskState
from bot.model.thread import TaskKey
from bot.service.prune import prune
from bot.store.base import QueuedJob
from bot.store.errors import LeaseLost, StateError
from bot.store.pg_lease import claim
from bot.store.postgres import PostgresStore
from bot.store.transfer import TaskRecord, copy_store
from tests.store.helpers import KEY, file_store, pg_store, sql, state

OTHER = state("github:acme/app#2").task_key()


def _die_holding(db: str, key: str) -> None:
    """The daemon holding `key` was SIGKILLed and its lease ran out."""
    sql(
        db,
        "UPDATE tasks SET lease_owner = 'dead', lease_token = 1,"
        " lease_expires = now() - interval '1 second' WHERE key = %s",
        key,
    )


# -- JSON the database's json operators cannot read -------------------------------------------


def test_a_nul_in_a_dead_daemons_task_does_not_stop_every_take(
    two: tuple[PostgresStore, PostgresStore], db: str
) -> None:
    """Tool output with a NUL saved in a running task's state; its daemon dies. `take()` must
    still hand out the queued jobs, and the orphan (promise 4), instead of failing for every
    daemon on `state->>'retry_at'` ("\\u0000 cannot be converted to text")."""
    first, second = two
    first.save(state(final_answer="binary\x00output"))
    _die_holding(db, str(KEY))
    first.save(state(OTHER, Status.RUNNING, retry_at="2999-01-01T00:00:00Z", reason="a\x00b"))
    _die_holding(db, str(OTHER))
    queued = state("github:acme/app#3").task_key()
    first.enqueue([QueuedJob(queued, fresh=True)])
    taken = second.take(10)
    assert taken == [QueuedJob(queued, True), QueuedJob(KEY, False)]  # OTHER backs off


def test_a_lone_surrogate_in_a_comment_is_stored_and_read_back(
    two: tuple[PostgresStore, PostgresStore],
) -> None:
    """A forge's JSON may hold a lone surrogate escape ("\\ud83d", a cut emoji): the comment
    must reach the conversation, not crash the task at every cycle."""
    first, _ = two
    with first.task_lock(KEY) as lease:
        fenced = first.fenced(lease)
        fenced.save(state())
        fenced.conversation(KEY).append({"role": "user", "content": "cut \ud83d emoji"})
        fenced.conversation(KEY).append({"role": "user", "content": "nul \x00 é"})
    assert first.conversation(KEY).entries() == [
        {"role": "user", "content": "cut \ud83d emoji"},
        {"role": "user", "content": "nul \x00 é"},
    ]


# -- prune racing a claim ---------------------------------------------------------------------


def test_a_prune_frozen_past_its_lease_removes_nothing(
    two: tuple[PostgresStore, PostgresStore], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bot prune` reads a finished task under its lease and freezes past it; a daemon takes
    the task (handed back: a new run starts). Prune wakes: it must not delete the new run."""
    pruner, daemon = two
    old = state(status=Status.DONE, updated_at="2000-01-01T00:00:00+00:00")
    sql(db, "INSERT INTO tasks (key, status, state) VALUES (%s, 'done', %s::json)",
        str(KEY), old.model_dump_json())  # fmt: skip
    real_load = PostgresStore.load

    def load_then_freeze(self: PostgresStore, key: TaskKey) -> TaskState | None:
        loaded = real_load(self, key)
        if self is pruner:
            sql(db, "UPDATE tasks SET lease_expires = now() - interval '1 second'")
            lease = claim(daemon._pool, KEY, "d2", 30)  # the hand-back, still being worked
            work = daemon.fenced(lease)
            work.save(state(run=2, step=1))
            work.conversation(KEY).append({"n": "new run"})
        return loaded

    monkeypatch.setattr(PostgresStore, "load", load_then_freeze)
    prune(pruner, timedelta(days=1), datetime.now(UTC))
    monkeypatch.undo()
    kept = daemon.load(KEY)
    assert kept is not None and kept.run == 2
    assert daemon.conversation(KEY).entries() == [{"n": "new run"}]


# -- import / export while daemons run --------------------------------------------------------


def test_an_import_never_overwrites_a_task_a_daemon_saved_meanwhile(
    tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """copy_store checks the destination, then writes: a daemon that saved the task between the
    two must not lose its work to the copy (nothing lost, promise 5)."""
    files = file_store(tmp_path / "state")
    files.save(state(step=1))
    database, daemon = pg_store(db, "bot-db"), pg_store(db, "d1")
    real_export = PostgresStore.export_task

    def export_then_daemon_saves(self: PostgresStore, key: object) -> TaskRecord | None:
        found = real_export(self, key)  # type: ignore[arg-type]
        with daemon.task_lock(KEY) as lease:
            daemon.fenced(lease).save(state(step=50))
        return found

    monkeypatch.setattr(PostgresStore, "export_task", export_then_daemon_saves)
    try:
        with pytest.raises(StateError):
            copy_store(files, database)
        kept = daemon.load(KEY)
        assert kept is not None and kept.step == 50
    finally:
        files.close()
        database.close()
        daemon.close()


def test_an_import_refuses_a_task_a_daemon_holds(tmp_path: Path, db: str) -> None:
    """A daemon claimed the task (no state saved yet) when the import runs: the import must not
    slip a state under it that the daemon's first save then replaces."""
    files = file_store(tmp_path / "state")
    files.save(state(step=7))
    database, daemon = pg_store(db, "bot-db"), pg_store(db, "d1")
    try:
        with daemon.task_lock(KEY) as lease:
            with pytest.raises(StateError, match="d1"):
                copy_store(files, database)
            daemon.fenced(lease).save(state(step=1))
    finally:
        files.close()
        database.close()
        daemon.close()


def test_an_export_while_a_run_is_handed_back_is_one_consistent_task(
    two: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Export reads the state, then the conversation: a hand-back between the two (run 1
    archived, run 2 started) must not give run 1's state with run 2's conversation."""
    exporter, daemon = two
    with daemon.task_lock(KEY) as lease:
        work = daemon.fenced(lease)
        work.save(state(status=Status.DONE, run=1))
        work.conversation(KEY).append({"n": "run 1"})
    import bot.store.pg_tasks as pg_tasks

    real_parse = pg_tasks.parse_state  # between reading the state and the conversation
    fired: list[bool] = []

    def read_then_hand_back(data: bytes) -> TaskState:
        found = real_parse(data)
        if not fired:
            fired.append(True)
            with daemon.task_lock(KEY) as lease:
                work = daemon.fenced(lease)
                work.archive_run(KEY, 1)
                work.save(state(run=2))
                work.conversation(KEY).append({"n": "run 2"})
        return found

    monkeypatch.setattr(pg_tasks, "parse_state", read_then_hand_back)
    record = exporter.export_task(KEY)
    assert record is not None and fired
    if record.state.run == 1:
        assert record.conversation == [{"n": "run 1"}] and record.runs == {}
    else:
        assert record.conversation == [{"n": "run 2"}] and record.runs == {1: [{"n": "run 1"}]}


# -- no password in any message or log --------------------------------------------------------


@pytest.mark.parametrize(
    "tail", ["password=se cret-pw", "password='s3cret-pw", "@@"], ids=["space", "quote", "url"]
)
def test_a_dsn_that_does_not_parse_shows_no_password_anywhere(
    db: str, tail: str, caplog: pytest.LogCaptureFixture
) -> None:
    """libpq quotes the piece of a DSN it cannot parse, and psycopg_pool logs it at every
    connection attempt: a password must appear neither in the error nor in any log line."""
    dsn = f"{db} {tail}" if tail != "@@" else "postgresql://bot:p%zzcret-pw@/x"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StateError) as refused:
        store = PostgresStore(dsn, lease_seconds=5, pool_size=2, connect_seconds=1)
        store.open("d1")
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "cret-pw" not in str(refused.value) + logged
    assert "store.dsn" in str(refused.value)  # names what to fix


# -- the database restarts under a running daemon ---------------------------------------------


def test_a_fenced_write_after_the_connections_died_goes_through(db: str) -> None:
    """A database restart (or a failover, an idle timeout) kills the pool's connections: the
    first write after it must not fail on a dead connection and interrupt the task."""
    store = pg_store(db, "d1")
    try:
        with store.task_lock(KEY) as lease:
            work = store.fenced(lease)
            work.save(state(step=1))
            sql(db, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()")  # fmt: skip
            work.save(state(step=2))
            work.conversation(KEY).append({"n": 1})
            lease.check()
    finally:
        store.close()


def test_a_frozen_claim_cannot_archive_after_takeover(
    two: tuple[PostgresStore, PostgresStore], db: str
) -> None:
    """archive_run under a lost lease moves nothing (the new holder's run 0 stays run 0)."""
    first, second = two
    first.save(state(status=Status.DONE))
    frozen = claim(first._pool, KEY, "d1", 30)
    sql(db, "UPDATE tasks SET lease_expires = now() - interval '1 second'")
    with second.task_lock(KEY) as lease:
        second.fenced(lease).conversation(KEY).append({"n": "new holder"})
        with pytest.raises(LeaseLost):
            first.fenced(frozen).archive_run(KEY, 1)
        assert second.conversation(KEY).entries() == [{"n": "new holder"}]


@pytest.mark.parametrize("command", [["status"], ["prune", "--older-than", "1d"], ["run"]])
def test_every_command_refuses_a_dsn_that_does_not_parse_with_exit_2(
    tmp_path: Path, pg_dsn: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a traceback (status, prune) nor a retried start (run): exit 2, the fix, no password."""
    from bot.cli import main
    from tests.store.test_db_cli import CONFIG

    cfg = tmp_path / "config.yaml"
    text = CONFIG.format(state_dir=tmp_path / "daemon")
    cfg.write_text(text + f"store:\n  backend: postgres\n  dsn: '{pg_dsn} password=se cret-pw'\n")
    code = main([*command, "-c", str(cfg)])
    out, err = capsys.readouterr()
    assert code == 2 and "store.dsn does not parse" in err
    assert "cret-pw" not in out + err


def test_a_lone_surrogate_in_a_comment_is_kept_by_the_files_backend(tmp_path: Path) -> None:
    store = file_store(tmp_path / "state")
    try:
        store.conversation(KEY).append({"content": "cut \ud83d emoji é"})
        assert store.conversation(KEY).entries() == [{"content": "cut \ud83d emoji é"}]
    finally:
        store.close()
