"""The GitHub App's installations and repositories are read again while the daemon runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from bot.app import build_daemon
from bot.core.config import ConfigError, parse_settings
from bot.model.state import Status
from bot.model.thread import Kind, Platform, TaskKey
from bot.service.daemon import Daemon
from bot_sandbox.forge_server import Fault, ForgeServer
from bot_sandbox.github_app import AppEmulator
from bot_sandbox.llm_server import LLMServer
from bot_sandbox.world import SThread
from tests.conftest import REPO
from tests.service.test_github_app import app_settings

OTHER = "acme/other"
LIB = "elsewhere/lib"
DONE = "coding agent done"


@pytest.fixture
def app(server: ForgeServer, model: LLMServer) -> AppEmulator:
    emulated = server.serve_github_app("coding-app")
    for repo in (OTHER, LIB):
        server.world.add_repo(
            "github", repo, files={"README.md": "# hi\n"}, roles={"alice": "write"}
        )
    model.policy = lambda request: {"tool_calls": [("finish", {"summary": "Done."})]}
    return emulated


@pytest.fixture
def make_daemon(
    server: ForgeServer, model: LLMServer, tmp_path: Path, app: AppEmulator
) -> Iterator[Any]:
    made: list[Daemon] = []

    def make(extra: str = "", app_extra: str = "") -> Daemon:
        settings = app_settings(server, model, tmp_path, app, extra, app_extra)
        stop = threading.Event()
        daemon = build_daemon(settings, stop)
        daemon.initialize()
        made.append(daemon)
        return daemon

    yield make
    for daemon in made:
        daemon.stop.set()
        daemon.close()


def _issue(server: ForgeServer, repo: str) -> SThread:
    return server.world.add_thread("github", repo, title="Q", labels=["coding agent"])


def _key(repo: str, thread: SThread) -> TaskKey:
    return TaskKey(Platform.GITHUB, repo, Kind.ISSUE, thread.number)


def _events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


def test_refresh_minutes_is_validated() -> None:
    with pytest.raises(ConfigError, match=r"github\.app\.refresh_minutes"):
        parse_settings("github: {app: {id: 3, private_key: k, refresh_minutes: -1}}\n", {})
    settings = parse_settings("github: {app: {id: 3, private_key: k}}\n", {})
    assert settings.github is not None and settings.github.app is not None
    assert settings.github.app.refresh_minutes == 10


def test_a_repository_added_to_the_installation_is_watched_without_restart(
    server: ForgeServer, app: AppEmulator, make_daemon: Any
) -> None:
    acme = app.install("acme", [REPO])
    thread = _issue(server, OTHER)
    daemon = make_daemon()
    daemon.run_once()
    assert DONE not in thread.labels and server.count(path=f"^/repos/{OTHER}") == 0
    app.add_repo(acme, OTHER)
    with capture_logs() as logs:
        daemon.refresh_app()
    changed = _events(logs, "app_installation_changed")
    assert [(e["installation"], e["added"], e["removed"]) for e in changed] == [(acme, [OTHER], [])]
    daemon.run_once()
    assert DONE in thread.labels
    assert {c.author.login for c in thread.comments} == {"coding-app[bot]"}


def test_a_new_installation_gets_its_own_poll_job(
    server: ForgeServer, app: AppEmulator, make_daemon: Any
) -> None:
    app.install("acme", [REPO])
    thread = _issue(server, LIB)
    # Polls every 5 s (the least allowed): the new installation's first poll is its own job,
    # started by the refresh (every 0.3 s), not the next tick of the existing one.
    daemon = make_daemon("poll_interval_seconds: 5", ", refresh_minutes: 0.005")
    runner = threading.Thread(target=daemon.run_forever)
    runner.start()
    try:
        time.sleep(1.0)
        assert server.count(path=f"^/repos/{LIB}") == 0
        app.install("elsewhere", [LIB])
        deadline = time.monotonic() + 20
        while DONE not in thread.labels and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        daemon.stop.set()
        runner.join(30)
    assert DONE in thread.labels


def test_a_removed_repository_and_installation_are_no_longer_polled(
    server: ForgeServer, model: LLMServer, app: AppEmulator, make_daemon: Any
) -> None:
    acme = app.install("acme", [REPO, OTHER])
    elsewhere = app.install("elsewhere", [LIB])
    thread = _issue(server, OTHER)
    first = make_daemon()

    def stop_mid_task(request: dict[str, Any]) -> dict[str, Any]:
        first.stop.set()  # the daemon stops mid-task: the task stays running on disk
        return {"tool_calls": [("finish", {"summary": "Done."})]}

    model.policy = stop_mid_task
    first.run_once()
    key = _key(OTHER, thread)
    assert first.store.load(key).status is Status.RUNNING
    first.close()
    daemon = make_daemon()  # watching both installations again
    app.remove_repo(acme, OTHER)
    app.uninstall(elsewhere)
    lib_thread = _issue(server, LIB)
    before = len(model.requests)
    with capture_logs() as logs:
        daemon.refresh_app()
        server.clear_log()
        daemon.run_once()
        daemon.refresh_app()
        daemon.run_once()
    changed = {(e["installation"], tuple(e["removed"])) for e in logs if "removed" in e}
    assert changed == {(acme, (OTHER,)), (elsewhere, (LIB,))}
    left = _events(logs, "task_left_alone")
    assert [e["task"] for e in left] == [str(key)]  # once
    assert server.count(path=f"^/repos/({OTHER}|{LIB})") == 0
    assert len(model.requests) == before
    state = daemon.store.load(key)
    assert state is not None and state.status is Status.RUNNING  # not failed
    assert DONE not in lib_thread.labels
    assert not daemon.check_thread(_key(LIB, lib_thread))  # webhooks: no source for it


def test_a_failed_refresh_keeps_the_previous_set(
    server: ForgeServer, app: AppEmulator, make_daemon: Any
) -> None:
    acme = app.install("acme", [REPO])
    thread = _issue(server, REPO)
    daemon = make_daemon()
    app.remove_repo(acme, REPO)  # would be applied, were the refresh to work
    server.add_fault(Fault(status=503, path="^/app/installations$", times=1))
    server.add_fault(Fault(kind="reset", path="^/installation/repositories$", times=1))
    app.install("elsewhere", [LIB])  # its first token cannot be minted
    server.add_fault(Fault(status=500, path="/access_tokens$", times=1))
    with capture_logs() as logs:
        daemon.refresh_app()
        daemon.refresh_app()
        daemon.refresh_app()
    failed = _events(logs, "app_refresh_failed")
    assert len(failed) == 1 and "503" in failed[0]["error"]  # logged once
    assert _events(logs, "app_installation_changed") == []
    assert server.count(path="/access_tokens$", status=500) == 1  # the third one failed there
    app.add_repo(acme, REPO)
    daemon.run_once()  # the previous set still works
    assert DONE in thread.labels
    app.remove_repo(acme, REPO)
    with capture_logs() as logs:
        daemon.refresh_app()  # works again: applied
    changed = _events(logs, "app_installation_changed")
    assert [(e["added"], e["removed"]) for e in changed] == [([], [REPO]), ([LIB], [])]


def test_a_daemon_started_before_any_installation_picks_the_first_one_up(
    server: ForgeServer, app: AppEmulator, make_daemon: Any
) -> None:
    thread = _issue(server, LIB)
    daemon = make_daemon()  # nothing to watch yet: no source carries the app
    daemon.run_once()
    app.install("elsewhere", [LIB])
    daemon.refresh_app()
    daemon.run_once()
    assert DONE in thread.labels
