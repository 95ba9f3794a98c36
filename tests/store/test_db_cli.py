"""`bot db migrate | import | export`: exit codes and messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from bot.model.state import Status
from bot.store import schema
from bot.store.files import FileStore
from bot.store.task_files import DaemonLock
from tests.store.helpers import KEY, file_store, migrated, pg_store, state

CONFIG = """
state_dir: {state_dir}
github:
  token: ghp_FAKEdbCLItoken0123456789abcdefAB
  repositories: [acme/app]
llm:
  base_url: http://127.0.0.1:9/v1
  model: qwen2.5-coder
  context_window: 32768
"""


def config(tmp_path: Path, dsn: str | None) -> Path:
    text = CONFIG.format(state_dir=tmp_path / "daemon")
    if dsn is not None:
        text += f"store:\n  backend: postgres\n  dsn: '{dsn} password=pw-not-shown'\n"
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    assert "pw-not-shown" not in out + err
    return code, out, err


def test_migrate_import_export(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = config(tmp_path, pg_dsn)
    source = file_store(tmp_path / "old")
    source.save(state("github:acme/app#1", Status.DONE, changes={"a": "1"}))
    source.save(state("github:acme/app#2"))
    source.close()
    code, _, err = run(capsys, "db", "import", "-c", cfg, "--from", tmp_path / "old")
    assert code == 2 and "run `bot db migrate -c" in err
    applied = "".join(f"applied {m.name}\n" for m in schema.shipped())  # 0001_initial, ...
    assert run(capsys, "db", "migrate", "-c", cfg)[:2] == (
        0,
        f"{applied}database schema is at version {schema.latest()}\n",
    )
    assert (
        run(capsys, "db", "migrate", "-c", cfg)[1]
        == f"database schema is at version {schema.latest()}\n"
    )
    code, out, _ = run(capsys, "db", "import", "-c", cfg, "--from", tmp_path / "old")
    assert code == 0 and out.startswith("imported 2 tasks from")
    assert run(capsys, "db", "import", "-c", cfg, "--from", tmp_path / "old")[1].startswith(
        "imported 0 tasks"
    )
    code, out, _ = run(capsys, "db", "export", "-c", cfg, "--to", tmp_path / "new")
    assert code == 0 and out.startswith("exported 2 tasks from user=bot dbname=")
    assert FileStore(tmp_path / "new").all_states() == FileStore(tmp_path / "old").all_states()
    database = pg_store(pg_dsn)
    database.save(state("github:acme/app#2", step=5))
    database.close()
    code, _, err = run(capsys, "db", "export", "-c", cfg, "--to", tmp_path / "new")
    assert code == 2 and "task github:acme/app#2 is already in" in err


def test_errors_exit_2_naming_the_problem(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "db", "migrate", "-c", config(tmp_path, None))
    assert code == 2 and "store.backend postgres" in err
    cfg = config(tmp_path, pg_dsn)
    assert run(capsys, "db", "migrate", "-c", cfg)[0] == 0
    code, _, err = run(capsys, "db", "import", "-c", cfg, "--from", tmp_path / "nothing")
    assert code == 2 and "no tasks" in err
    busy = DaemonLock(tmp_path / "live")
    busy.acquire()  # a daemon runs on this state dir
    try:
        code, _, err = run(capsys, "db", "export", "-c", cfg, "--to", tmp_path / "live")
        assert code == 2 and "in use by another daemon" in err
    finally:
        busy.release()
    away = config(tmp_path, "host=/nonexistent dbname=x")
    code, _, err = run(capsys, "db", "migrate", "-c", away)
    assert code == 2 and "cannot migrate database" in err and "/nonexistent" in err


def test_status_shows_which_daemon_holds_which_task(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = config(tmp_path, migrated(pg_dsn))
    store = pg_store(pg_dsn, daemon="bot-on-host-b")
    store.save(state("github:acme/app#1"))
    store.save(state("github:acme/app#2", Status.DONE))
    try:
        with store.task_lock(KEY):
            code, out, _ = run(capsys, "status", "-c", cfg)
    finally:
        store.close()
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "worked by" in out.splitlines()[0]
    assert "bot-on-host-b (lease to" in lines["github:acme/app#1"]
    assert "bot-on-host-b" not in lines["github:acme/app#2"]
    code, out, _ = run(capsys, "status", "-c", cfg)  # released: nobody holds it
    assert code == 0 and "bot-on-host-b" not in out


def test_two_daemons_on_one_database_still_need_a_state_dir_each(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = config(tmp_path, migrated(pg_dsn))
    other = DaemonLock(tmp_path / "daemon")  # another daemon on this machine, same state_dir
    other.acquire()
    try:
        code, _, err = run(capsys, "run", "--once", "-c", cfg)
    finally:
        other.release()
    assert code == 2 and "is in use by another daemon" in err


def test_a_daemon_refuses_a_database_without_the_schema_and_names_the_fix(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = config(tmp_path, pg_dsn)  # not migrated
    code, _, err = run(capsys, "run", "--once", "-c", cfg)
    needs = f"schema is version 0, this bot needs {schema.latest()}: run `bot db migrate -c"
    assert code == 2 and needs in err


def test_a_daemon_whose_database_is_away_exits_1_to_be_restarted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    away = f"host={tmp_path} port=1 dbname=bot user=bot connect_timeout=1"  # no server there
    cfg = config(tmp_path, away)
    cfg.write_text(cfg.read_text() + "  connect_seconds: 1\n")
    code, out, err = run(capsys, "run", "--once", "-c", cfg)
    assert code == 1 and "database_unavailable" in out + err


def test_readers_of_a_database_without_the_schema_name_the_fix(
    tmp_path: Path, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`bot status`, `bot prune` and `bot db export` say what `bot run` says (issue 19)."""
    cfg = config(tmp_path, pg_dsn)  # an empty database: never migrated
    for argv in (
        ("status",),
        ("prune", "--older-than", "30d"),
        ("db", "export", "--to", tmp_path / "out"),
    ):
        code, out, err = run(capsys, *argv, "-c", cfg)
        assert code == 2, argv
        needs = f"schema is version 0, this bot needs {schema.latest()}: run `bot db migrate -c"
        assert needs in err, argv
        assert "does not exist" not in out + err, argv  # not the raw SQL error
