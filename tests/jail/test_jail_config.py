"""`bot check-config` and `bot run` refuse a jail that cannot work here, naming key and fix."""

from __future__ import annotations

import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from bot.cli import main
from bot.core.config import ConfigError, parse_settings
from tests.conftest import BOT_TOKEN

BASE = "github: {token: x, repositories: [a/b]}\n"


def _config(tmp_path: Path, jail: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"{BASE}state_dir: {tmp_path / 'state'}\njail: {jail}\n")
    return path


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_missing_bubblewrap_exits_2_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _config(tmp_path, "{enabled: true, bwrap: /nonexistent/bwrap}")
    assert main(["check-config", "-c", str(path)]) == 2
    err = _one_line(capsys)
    assert "jail.bwrap:" in err and "apt-get install bubblewrap" in err
    assert main(["run", "--once", "-c", str(path)]) == 2  # the daemon refuses it too


def test_refused_namespaces_exit_2_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What bubblewrap prints where user namespaces are off (e.g. a default Docker seccomp).
    # Outside tmp_path: as root, the jail's unprivileged uid must be able to execute it.
    where = Path(tempfile.mkdtemp(prefix="fake-bwrap-"))
    where.chmod(0o755)
    fake = where / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the"
        " kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    path = _config(tmp_path, f"{{enabled: true, bwrap: {fake}}}")
    try:
        assert main(["check-config", "-c", str(path)]) == 2
    finally:
        shutil.rmtree(where)
    err = _one_line(capsys)
    assert "jail.enabled:" in err and "No permissions to creating new namespace" in err
    assert "user namespaces" in err and "jail.enabled: false" in err


def test_a_working_jail_passes_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _config(tmp_path, "{enabled: true}")
    assert main(["check-config", "-c", str(path)]) == 0, capsys.readouterr().err


def test_a_credential_in_the_jail_environment_is_refused() -> None:
    text = f"github: {{token: {BOT_TOKEN}, repositories: [a/b]}}\njail: {{env: {{T: {BOT_TOKEN}}}}}"
    with pytest.raises(ConfigError, match=r"jail\.env\.T: holds a forge or model credential"):
        parse_settings(text, {})
    assert BOT_TOKEN not in str(ConfigError)


@pytest.mark.parametrize(
    ("jail", "key"),
    [
        (
            "{enabled: true, slirp4netns: /nonexistent/slirp4netns, repositories:"
            " {a/b: {setup: [pip install .], setup_network: true}}}",
            "jail.repositories.a/b.setup_network",
        ),
        (
            "{enabled: true, slirp4netns: /nonexistent/slirp4netns,"
            " allow_repo_setup_network: true}",
            "jail.allow_repo_setup_network",
        ),
    ],
)
def test_networked_setup_without_slirp4netns_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], jail: str, key: str
) -> None:
    path = _config(tmp_path, jail)
    assert main(["check-config", "-c", str(path)]) == 2
    err = _one_line(capsys)
    assert f"{key}:" in err and "apt-get install slirp4netns" in err
    assert main(["run", "--once", "-c", str(path)]) == 2


def test_slirp4netns_is_needed_only_for_networked_setup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _config(tmp_path, "{enabled: true, slirp4netns: /nonexistent/slirp4netns}")
    assert main(["check-config", "-c", str(path)]) == 0, capsys.readouterr().err
    networked = "{enabled: true, allow_repo_setup_network: true}"
    assert main(["check-config", "-c", str(_config(tmp_path, networked))]) == 0
