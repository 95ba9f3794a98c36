"""Attacks on the read-only task page (bot/service/ui/): each answer is a page of ours, with its
security headers, whatever the address; the real waitress listener, requests as the client."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bot.cli import main
from bot.task.page_link import task_path
from tests.service.test_ui_page import Page, hostile_task, serve
from tests.store.helpers import KEY

__all__ = ["serve"]  # the fixture, used by name

HUGE = "9" * 5000  # past Python's 4,300-digit limit of int(str)


def test_a_number_too_long_for_int_is_a_bad_address_not_a_server_error(
    serve: Callable[..., Page],
) -> None:
    page = serve()
    hostile_task(page.store)
    for path, status in [
        (f"/tasks/github/acme/app/issue/{HUGE}", 404),
        (f"{task_path(KEY)}?run={HUGE}", 400),
    ]:
        answer = page.get(path)
        assert answer.status_code == status, (path[:60], answer.status_code)
        assert "default-src 'none'" in answer.headers["Content-Security-Policy"]


@pytest.mark.parametrize("password", ["''", "'${UI_PASSWORD:-}'", "'   '"])
def test_an_empty_password_is_no_password_off_loopback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], password: str
) -> None:
    """Basic auth with an empty password lets anyone in (`Og==` is ":"): it is refused too."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "github: {token: t0ken, repositories: [acme/app]}\n"
        f"state_dir: {tmp_path / 'state'}\nui: {{listen: '0.0.0.0:8089', password: {password}}}\n",
        encoding="utf-8",
    )
    assert main(["check-config", "-c", str(config)]) == 2
    assert "ui.password" in capsys.readouterr().err
