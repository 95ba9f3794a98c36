"""Attacks on the read-only task page (bot/service/ui/): each answer is a page of ours, with its
security headers, whatever the address; the real waitress listener, requests as the client."""

from __future__ import annotations

from collections.abc import Callable

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
