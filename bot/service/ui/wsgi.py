"""The page's WSGI application: `GET /` (the task list, `?status=` and `?repo=` filter it) and
`GET /tasks/<platform>/<repository>/<kind>/<number>[?run=N]` (one task; `bot/task/page_link.py`).

Every answer carries the same security headers: a Content-Security-Policy that allows no
script, no frame, no resource from anywhere, and only the page's own stylesheet (by a nonce
new on every answer), so that even text that got past escaping could do nothing; no sniffing,
no referrer, no framing, no caching. Read-only: GET and HEAD only (405 otherwise). With a
password (`ui.password_file`) nothing is shown without it (401, `bot/service/ui/auth.py`).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment

from bot.core.log import get_logger
from bot.core.pricing import Price
from bot.service.listener import Environ, StartResponse
from bot.service.ui.auth import CHALLENGE, BasicAuth
from bot.service.ui.links import ForgeLinks
from bot.service.ui.render import environment, render
from bot.service.ui.views import Filters, task_list, task_page
from bot.store.base import Store
from bot.store.errors import StateError
from bot.task.page_link import PREFIX, parse_task_path
from bot.task.timeline import TimelineError

log = get_logger(__name__)

REFRESH_SECONDS = 5  # a running task's page reloads itself this often
_STATUS = {
    200: "200 OK",
    400: "400 Bad Request",
    401: "401 Unauthorized",
    404: "404 Not Found",
    405: "405 Method Not Allowed",
    503: "503 Service Unavailable",
}


def security_headers(nonce: str) -> list[tuple[str, str]]:
    policy = (
        f"default-src 'none'; style-src 'nonce-{nonce}'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    )
    return [
        ("Content-Security-Policy", policy),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
        ("Cache-Control", "no-store"),
    ]


@dataclass(frozen=True)
class Answer:
    status: int
    template: str
    values: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()


class PageApp:
    """`store`: where the tasks are read; `price`: `llm.price` (None: tokens only); `auth`:
    the password's check (None: no password, loopback only)."""

    def __init__(
        self,
        store: Store,
        links: ForgeLinks,
        price: Price | None = None,
        auth: BasicAuth | None = None,
    ) -> None:
        self.store = store
        self.links = links
        self.price = price
        self.auth = auth
        self.env: Environment = environment()

    def __call__(self, environ: Environ, start: StartResponse) -> Iterable[bytes]:
        answer = self._answer(environ)
        nonce = secrets.token_urlsafe(16)
        root = str(environ.get("SCRIPT_NAME") or "").rstrip("/")
        body = render(self.env, answer.template, nonce=nonce, root=root, **answer.values)
        headers = [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(body))),
            *security_headers(nonce),
            *answer.headers,
        ]
        start(_STATUS[answer.status], headers)
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]

    def _answer(self, environ: Environ) -> Answer:
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _message(405, "Read-only", "This page only shows.", ("Allow", "GET, HEAD"))
        if self.auth is not None and not self.auth.allows(environ.get("HTTP_AUTHORIZATION")):
            text = "This page needs the password (HTTP basic authentication, ui.password_file)."
            return _message(401, "Password required", text, ("WWW-Authenticate", CHALLENGE))
        path = str(environ.get("PATH_INFO") or "/")
        query = parse_qs(str(environ.get("QUERY_STRING") or ""))
        try:
            if path in ("/", PREFIX.rstrip("/"), PREFIX):
                return self._list(query)
            if path.startswith(PREFIX):
                return self._task(path, query)
        except StateError as exc:  # the database away, say: the page says so, the log why
            log.warning("ui_store_unavailable", error=str(exc))
            return _message(503, "Store unavailable", "The task store could not be read.")
        return _message(404, "Not found", "No such page.")

    def _list(self, query: dict[str, list[str]]) -> Answer:
        filters = Filters(status=_one(query, "status"), repo=_one(query, "repo"))
        listing = task_list(self.store, self.price, self.links, filters)
        refresh = REFRESH_SECONDS * 2 if listing.running else None
        return Answer(
            200, "tasks.html", {"listing": listing, "filters": filters, "refresh": refresh}
        )

    def _task(self, path: str, query: dict[str, list[str]]) -> Answer:
        key = parse_task_path(path)
        if key is None:
            return _message(404, "Not found", "That is not the address of a task.")
        run_text = _one(query, "run")
        if run_text is not None and not (run_text.isascii() and run_text.isdigit()):
            return _message(400, "Bad request", "run must be a run's number.")
        try:
            page = task_page(
                self.store, key, int(run_text) if run_text else None, self.price, self.links
            )
        except TimelineError as exc:
            return _message(404, "Not found", str(exc))
        refresh = REFRESH_SECONDS if page.refresh else None
        return Answer(200, "task.html", {"page": page, "refresh": refresh})


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values and values[0] else None


def _message(status: int, title: str, message: str, *headers: tuple[str, str]) -> Answer:
    return Answer(
        status, "message.html", {"title": title, "message": message, "refresh": None}, headers
    )
