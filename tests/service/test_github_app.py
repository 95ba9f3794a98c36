"""The daemon as a GitHub App against the emulator's app: JWT, installation tokens, identity."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.app import build_daemon
from bot.core.config import ConfigError, Settings, parse_settings
from bot.forge.errors import AuthError
from bot.forge.factory import build_sources
from bot.forge.github_app import GitHubApp
from bot.model.state import Status
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.github_app import AppEmulator
from bot_sandbox.llm_server import LLMServer
from tests.conftest import REPO

SLUG = "coding-app"


@pytest.fixture
def app(server: ForgeServer) -> AppEmulator:
    emulated = server.serve_github_app(SLUG)
    server.world.add_repo("github", "acme/other", roles={"alice": "write"})
    server.world.add_repo("github", "elsewhere/lib", roles={"alice": "write"})
    emulated.install("acme", [REPO, "acme/other"])
    emulated.install("elsewhere", ["elsewhere/lib"])
    return emulated


def app_settings(
    server: ForgeServer,
    model: LLMServer,
    tmp_path: Path,
    app: AppEmulator,
    extra: str = "",
    app_extra: str = "",
) -> Settings:
    key = tmp_path / "app-key.pem"
    key.write_text(app.private_key_pem)
    return parse_settings(
        f"""
state_dir: {tmp_path / "state"}
github:
  api_url: "{server.url}"
  app: {{id: {app.app_id}, private_key_file: {key}{app_extra}}}
  seconds_between_writes: 0
{extra}
llm: {{base_url: "{model.url}", model: scripted-model, max_retries: 1}}
""",
        {},
    )


def test_app_settings_need_id_and_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"github\.app\.private_key"):
        parse_settings("github: {app: {id: 3}}\n", {})
    with pytest.raises(ConfigError, match=r"github\.token"):
        parse_settings("github: {token: t, app: {id: 3, private_key: k}}\n", {})


def test_identity_and_repositories_of_the_installations(
    server: ForgeServer, model: LLMServer, tmp_path: Path, app: AppEmulator
) -> None:
    sources = build_sources(app_settings(server, model, tmp_path, app))
    assert sorted(s.repos for s in sources) == [("acme/app", "acme/other"), ("elsewhere/lib",)]
    assert {s.forge.whoami().login for s in sources} == {"coding-app[bot]"}
    assert server.count(path="^/user$") == 0  # not available to installation tokens
    subset = app_settings(server, model, tmp_path, app, "  repositories: [acme/other]")
    assert [s.repos for s in build_sources(subset)] == [("acme/other",)]


def test_the_daemon_runs_as_the_app(
    server: ForgeServer, model: LLMServer, tmp_path: Path, app: AppEmulator
) -> None:
    thread = server.world.add_thread("github", REPO, title="Q", labels=["coding agent"])
    model.policy = lambda request: {"tool_calls": [("finish", {"summary": "It prints hi."})]}
    settings = app_settings(server, model, tmp_path, app)
    stop = threading.Event()
    daemon = build_daemon(settings, stop)
    daemon.initialize()
    try:
        daemon.run_once()
    finally:
        daemon.close()
    authors = {c.author.login for c in thread.comments}
    assert authors == {"coding-app[bot]"}
    assert "coding agent done" in thread.labels
    state = daemon.store.load(_key(thread))
    assert state is not None and state.status is Status.DONE
    assert app.tokens_minted >= 1
    secrets = [*app.issued_tokens(), app.private_key_pem.splitlines()[1]]
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            data = path.read_text(errors="replace")
            assert not any(secret in data for secret in secrets), path


def _key(thread: Any) -> Any:
    from bot.model.thread import Kind, Platform, TaskKey

    return TaskKey(Platform.GITHUB, REPO, Kind.ISSUE, thread.number)


def test_installation_tokens_are_reused_then_refreshed_before_expiry(
    server: ForgeServer, model: LLMServer, tmp_path: Path, app: AppEmulator
) -> None:
    forge = build_sources(app_settings(server, model, tmp_path, app))[0].forge
    minted = app.tokens_minted
    for _ in range(3):
        forge.default_branch(REPO)
    assert app.tokens_minted == minted  # valid an hour: reused
    app.lifetime = 10.0  # inside PyGithub's refresh margin: each use mints a fresh token
    app.expire_tokens()  # the held token is now refused by the forge
    fresh = build_sources(app_settings(server, model, tmp_path, app))[0].forge
    before = app.tokens_minted
    fresh.default_branch(REPO)
    fresh.default_branch(REPO)
    assert app.tokens_minted >= before + 2
    assert server.count(path="/repos/acme/app$", status=401) == 0


def test_expired_token_and_foreign_jwt_are_refused(server: ForgeServer, app: AppEmulator) -> None:
    token, _ = app.mint(next(iter(app.installations)))
    url = f"{server.url}/repos/{REPO}"
    assert requests.get(url, headers={"Authorization": f"token {token}"}, timeout=5).ok
    app.expire_tokens()
    gone = requests.get(url, headers={"Authorization": f"token {token}"}, timeout=5)
    assert gone.status_code == 401
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = other.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    with pytest.raises(AuthError):
        GitHubApp(server.url, app.app_id, pem).identity()
    assert GitHubApp(server.url, app.app_id, app.private_key_pem).identity().login == (
        "coding-app[bot]"
    )


def test_each_installation_resumes_only_its_own_tasks(
    server: ForgeServer, model: LLMServer, tmp_path: Path, app: AppEmulator
) -> None:
    from bot.model.thread import Kind, Platform, TaskKey

    settings = app_settings(server, model, tmp_path, app)
    assert app.private_key_pem.strip() in settings.secrets()  # redacted from every log line
    acme, elsewhere = sorted(build_sources(settings), key=lambda s: s.repos)
    theirs = TaskKey(Platform.GITHUB, "elsewhere/lib", Kind.ISSUE, 1)
    assert elsewhere.owns(theirs) and not acme.owns(theirs)
    assert not acme.owns(TaskKey(Platform.GITLAB, REPO, Kind.ISSUE, 1))


def test_an_app_watching_one_repository_lists_it_without_an_assignee_query(
    server: ForgeServer, model: LLMServer, tmp_path: Path, app: AppEmulator
) -> None:
    """Issue 19, suspicion (b): `?assignee=<slug>[bot]` is answered 200 with nothing (an app
    is never an assignee), so an app's per-repository listing works; it is not even asked."""
    from bot.service.discovery import discover

    labelled = server.world.add_thread("github", "elsewhere/lib", labels=["coding agent"])
    sources = build_sources(app_settings(server, model, tmp_path, app))
    (source,) = [s for s in sources if s.repos == ("elsewhere/lib",)]
    server.clear_log()
    found = discover(source)
    assert [t.key.number for t in found.tasks] == [labelled.number]
    listings = [r for r in server.requests if r.path == "/repos/elsewhere/lib/issues"]
    assert listings and all("assignee" not in r.query for r in listings)
    # What GitHub answers the query an app's listing used to send: nothing, not an error.
    installation = next(i for i in app.installations.values() if "elsewhere/lib" in i.repos)
    token, _expires = app.mint(installation.id)
    answer = requests.get(
        f"{server.url}/repos/elsewhere/lib/issues",
        {"assignee": f"{SLUG}[bot]", "state": "open"},
        headers={"Authorization": f"token {token}"},
        timeout=5,
    )
    assert (answer.status_code, answer.json()) == (200, [])
