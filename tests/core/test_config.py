from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from bot.cli import main
from bot.core.config import (
    ConfigError,
    Settings,
    first_error,
    load_settings,
    parse_settings,
    reject_unknown_keys,
    summary,
)

GOOD = """
state_dir: /var/lib/bot
poll_interval_seconds: 30
max_concurrent_tasks: 4
github:
  api_url: https://github.example.com/api/v3
  token: ${GH_TOKEN}
  repositories: [acme/app, acme/lib]
gitlab:
  url: https://gitlab.example.com
  token_file: gitlab-token
  projects: [group/sub/proj]
labels:
  trigger: "ai please"
llm:
  base_url: http://127.0.0.1:11434/v1
  model: qwen2.5-coder
  context_window: 32768
access:
  allowed_users: [alice]
  ignore_authors: ["renovate[bot]"]
"""


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_full_config_loads_with_env_and_credentials_dir(tmp_path: Path) -> None:
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "gitlab-token").write_text("glpat-secretsecretsecret\n")
    env = {"GH_TOKEN": "ghp_fromenvfromenvfromenv", "CREDENTIALS_DIRECTORY": str(creds)}
    settings = load_settings(write(tmp_path, GOOD), env)
    assert settings.github is not None and settings.gitlab is not None
    assert settings.github.token.get_secret_value() == "ghp_fromenvfromenvfromenv"
    assert settings.gitlab.token.get_secret_value() == "glpat-secretsecretsecret"
    assert settings.gitlab.projects == ("group/sub/proj",)
    assert settings.labels.trigger == "ai please"
    assert settings.labels.done == "coding agent done"  # defaults fill the rest
    assert settings.llm.context_window == 32768
    assert set(settings.secrets()) == {"ghp_fromenvfromenvfromenv", "glpat-secretsecretsecret"}
    with pytest.raises(ValidationError):  # frozen
        settings.poll_interval_seconds = 5  # type: ignore[misc]


def test_token_file_relative_to_config_without_systemd(tmp_path: Path) -> None:
    (tmp_path / "gitlab-token").write_text("glpat-besidebesidebeside")
    settings = load_settings(write(tmp_path, GOOD), {"GH_TOKEN": "x" * 10})
    assert settings.gitlab is not None
    assert settings.gitlab.token.get_secret_value() == "glpat-besidebesidebeside"


def test_defaults() -> None:
    settings = parse_settings("github: {token: t0ken, repositories: [a/b]}", {})
    assert settings.poll_interval_seconds == 60
    assert settings.max_concurrent_tasks == 2
    assert settings.labels.model_dump() == {
        "trigger": "coding agent",
        "processing": "coding agent processing",
        "done": "coding agent done",
        "paused": "coding agent paused",
        "stopped": "coding agent stopped",
        "failed": "coding agent failed",
    }


def test_env_default_syntax() -> None:
    settings = parse_settings("github: {token: '${NOPE:-fallback}', repositories: [a/b]}", {})
    assert settings.github is not None and settings.github.token.get_secret_value() == "fallback"


def test_summary_masks_secrets(tmp_path: Path) -> None:
    (tmp_path / "gitlab-token").write_text("glpat-maskmemaskmemaskme")
    settings = load_settings(write(tmp_path, GOOD), {"GH_TOKEN": "ghp_maskmemaskmemaskme"})
    data = summary(settings)
    assert "maskme" not in repr(data)
    assert data["github"]["token"] == data["gitlab"]["token"] == "********"  # masked, not dropped
    assert data["github"]["repositories"] == ["acme/app", "acme/lib"]


BROKEN = [
    ("unknown top-level key", "githb: {}\n", "githb: unknown key"),
    (
        "unknown nested key",
        "github: {token: x, repositories: [a/b], repo: x}\n",
        "github.repo: unknown key",
    ),
    (
        "wrong type",
        "poll_interval_seconds: soon\ngithub: {token: x, repositories: [a/b]}\n",
        "poll_interval_seconds",
    ),
    (
        "below minimum",
        "max_concurrent_tasks: 0\ngithub: {token: x, repositories: [a/b]}\n",
        "max_concurrent_tasks",
    ),
    (
        "missing env var",
        "github: {token: '${MISSING_TOKEN}', repositories: [a/b]}\n",
        "github.token: environment variable MISSING_TOKEN",
    ),
    (
        "unreadable token file",
        "gitlab: {token_file: /nonexistent/tok, projects: [a/b]}\n",
        "gitlab.token_file: cannot read",
    ),
    (
        "both token and token_file",
        "gitlab: {token: x, token_file: y, projects: [a/b]}\n",
        "gitlab.token_file",
    ),
    ("missing token", "github: {repositories: [a/b]}\n", "github.token: required key is missing"),
    ("bad repository", "github: {token: x, repositories: [notarepo]}\n", "github.repositories"),
    ("no source", "state_dir: /tmp/x\n", "configure at least one"),
    ("not a mapping", "- a\n- b\n", "top level must be a mapping"),
    ("invalid yaml", "github: {token: x\n", "not valid YAML"),
    ("empty repository list", "github: {token: x, repositories: []}\n", "github.repositories"),
    (
        "duplicate labels",
        "github: {token: x, repositories: [a/b]}\nlabels: {done: coding agent}\n",
        "labels",
    ),
    (
        "bad llm key",
        "github: {token: x, repositories: [a/b]}\nllm: {context_window: 10}\n",
        "llm.context_window",
    ),
    ("wrong list type", "github: {token: x, repositories: a/b}\n", "github.repositories"),
    (
        "bad label type",
        "github: {token: x, repositories: [a/b]}\nlabels: {trigger: [a]}\n",
        "labels.trigger",
    ),
]


@pytest.mark.parametrize(("name", "text", "expected"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_config_exits_2_naming_the_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    text: str,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MISSING_TOKEN", raising=False)
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    path = write(tmp_path, text)
    assert main(["check-config", "-c", str(path)]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", "-c", str(tmp_path / "none.yaml")]) == 2
    assert "cannot read config file" in capsys.readouterr().err


def test_config_error_names_path() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings("github: {token: x, repositories: [a/b, bad]}", {})
    assert caught.value.path == "github.repositories"
    assert "'bad'" in str(caught.value)


def test_check_config_in_a_real_process_masks_the_token(tmp_path: Path) -> None:
    token = "ghp_REALPROCESSSECRET0123456789abcdef"
    path = write(tmp_path, "github: {token: '${GH_TOKEN}', repositories: [a/b]}\n")
    env = {**os.environ, "GH_TOKEN": token}
    done = subprocess.run(
        [sys.executable, "-m", "bot", "check-config", "-c", str(path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "repositories" in done.stdout
    assert token not in done.stdout + done.stderr


def test_unusable_token_file_path_is_a_config_error() -> None:
    # Found by the fuzzer: a lone surrogate (or NUL) in the path raised instead of exiting 2.
    with pytest.raises(ConfigError, match=r"gitlab\.token_file: is not a usable file path"):
        parse_settings('gitlab: {token_file: "\\ud800", projects: [a/b]}', {})


TYPOS = [
    (
        "typo of a required key",
        "github: {tokn: x, repositories: [a/b]}\n",
        "github.tokn: unknown key (did you mean token?)",
    ),
    (
        "typo before an unset variable",
        "github: {tokn: '${MISSING_TOKEN}', repositories: [a/b]}\n",
        "github.tokn: unknown key (did you mean token?)",
    ),
    (
        "typo of a credential file key",
        "gitlab: {token_fil: tok, projects: [a/b]}\n",
        "gitlab.token_fil: unknown key (did you mean token_file?)",
    ),
    (
        "typo of a section",
        "githb: {token: x, repositories: [a/b]}\n",
        "githb: unknown key (did you mean github?)",
    ),
    (
        "typo in a defaulted section",
        "github: {token: x, repositories: [a/b]}\nllm: {modle: m, context_window: 10}\n",
        "llm.modle: unknown key (did you mean model?)",
    ),
]


@pytest.mark.parametrize(("name", "text", "expected"), TYPOS, ids=[t[0] for t in TYPOS])
def test_unknown_key_is_reported_first_with_the_closest_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    text: str,
    expected: str,
) -> None:
    monkeypatch.delenv("MISSING_TOKEN", raising=False)
    assert main(["check-config", "-c", str(write(tmp_path, text))]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"bot: invalid configuration: {expected}"


def test_unknown_key_far_from_every_key_gets_no_suggestion() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings("github: {token: x, repositories: [a/b], colour: red}", {})
    assert str(caught.value) == "github.colour: unknown key"


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    allow: bool = False


class _Repo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    rules: tuple[_Rule, ...] = ()
    by_name: dict[str, _Rule] = {}


class _Root(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repos: list[_Repo] | None = None


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"repos": [{"name": "a"}, {"nmae": "b"}]},
            "repos[1].nmae: unknown key (did you mean name?)",
        ),
        (
            {"repos": [{"name": "a", "rules": [{"path": "x", "alow": True}]}]},
            "repos[0].rules[0].alow: unknown key (did you mean allow?)",
        ),
        (
            {"repos": [{"name": "a", "by_name": {"ci": {"pth": "x"}}}]},
            "repos[0].by_name.ci.pth: unknown key (did you mean path?)",
        ),
    ],
)
def test_unknown_keys_are_found_in_list_items_and_maps(
    data: dict[str, object], expected: str
) -> None:
    # Settings has no list of sections yet (per-repository sections may come); the walker
    # follows whatever the models declare, so a small model of that shape stands in.
    with pytest.raises(ConfigError) as caught:
        reject_unknown_keys(data, _Root)
    assert str(caught.value) == expected


def test_validation_error_puts_the_unknown_key_before_the_missing_one() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings.model_validate({"github": {"repositories": ["a/b"], "tokn": "x"}})
    assert str(first_error(caught.value)) == "github.tokn: unknown key"


@pytest.mark.parametrize("lease", ["1", "2.9"])
def test_a_task_lease_shorter_than_a_stall_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lease: str
) -> None:
    """Renewed every third of it, a 1 s lease is lost to any pause of 0.7 s (issue 19)."""
    store = f"store: {{backend: postgres, dsn: 'host=db dbname=bot', lease_seconds: {lease}}}\n"
    path = write(tmp_path, "github: {token: x, repositories: [a/b]}\n" + store)
    assert main(["check-config", "-c", str(path)]) == 2
    err = capsys.readouterr().err
    assert "store.lease_seconds: must be at least 3 seconds" in err
    assert len(err.strip().splitlines()) == 1


def test_the_shortest_task_lease_is_accepted() -> None:
    store = "store: {backend: postgres, dsn: 'host=db dbname=bot', lease_seconds: 3}\n"
    settings = parse_settings("github: {token: x, repositories: [a/b]}\n" + store, {})
    assert settings.store.lease_seconds == 3.0
