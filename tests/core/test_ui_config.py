"""`ui:`: the task page's address, password and public address. Off loopback a password is
required: without `ui.password_file` the configuration is refused with exit 2 naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from bot.core.config import ConfigError, is_loopback, parse_settings

BASE = "github: {token: t0ken, repositories: [acme/app]}\n"


def write(tmp_path: Path, ui: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(BASE + f"state_dir: {tmp_path / 'state'}\nui: {ui}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("command", ["check-config", "run"])
@pytest.mark.parametrize("listen", ["0.0.0.0:8089", ":8089", "[::]:8089", "bot.example:8089"])
def test_a_page_off_loopback_without_a_password_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listen: str, command: str
) -> None:
    path = write(tmp_path, f"{{listen: '{listen}'}}")
    assert main([command, "-c", str(path)]) == 2
    err = capsys.readouterr().err
    assert "ui.password_file" in err and listen in err
    assert not (tmp_path / "state").exists()  # refused before anything started


def test_with_a_password_file_it_may_listen_anywhere_and_the_password_stays_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ui-password").write_text("pa55-word-value\n", encoding="utf-8")
    path = write(tmp_path, "{listen: '0.0.0.0:8089', password_file: ui-password}")
    assert main(["check-config", "-c", str(path)]) == 0
    out = capsys.readouterr().out
    assert "pa55-word-value" not in out and "password: '********'" in out
    settings = parse_settings(path.read_text(), {}, base_dir=tmp_path)
    assert settings.ui is not None and settings.ui.password is not None
    assert "pa55-word-value" in settings.secrets()  # redacted from every log line


@pytest.mark.parametrize(
    ("listen", "loopback"),
    [
        ("127.0.0.1:8089", True),
        ("127.8.9.1:1", True),
        ("localhost:8089", True),
        ("[::1]:8089", True),
        ("0.0.0.0:8089", False),
        (":8089", False),
        ("10.0.0.5:8089", False),
        ("bot.internal:8089", False),
    ],
)
def test_loopback_is_an_address_of_this_machine_only(listen: str, loopback: bool) -> None:
    assert is_loopback(listen) is loopback


def test_the_defaults_and_the_public_url(tmp_path: Path) -> None:
    settings = parse_settings(BASE + "ui: {}\n", {})
    assert settings.ui is not None and settings.ui.listen == "127.0.0.1:8089"
    assert settings.ui.password is None and settings.ui.public_url is None
    with pytest.raises(ConfigError) as refused:
        parse_settings(BASE + "ui: {public_url: 'javascript:alert(1)'}\n", {})
    assert refused.value.path == "ui.public_url"
