"""The request and response every route of the emulator speaks, and what routes share of HTTP.

A route module declares `Endpoint`s: a method, a path pattern and a plain function taking the
narrow view of the server it needs (`bot_sandbox/site.py`), the request and the path's match.
The server binds them to itself (`bind`) and tries the resulting `Route`s in order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

from bot_sandbox.world import SUser

S = TypeVar("S")


class HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    raw_body: bytes
    user: SUser | None
    base_url: str
    platform: str


@dataclass
class Response:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    paginate: bool = False
    raw: bytes | None = None


Handler = Callable[[Request, re.Match[str]], Response]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: Handler


@dataclass(frozen=True)
class Endpoint(Generic[S]):
    """One route as a module declares it: `handler(site, request, match)`."""

    method: str
    pattern: str
    handler: Callable[[S, Request, re.Match[str]], Response]


def bind(site: S, endpoints: Iterable[Endpoint[S]]) -> list[Route]:
    """The endpoints as routes the server can try, each handed `site`."""
    return [Route(e.method, re.compile(e.pattern), _bound(site, e.handler)) for e in endpoints]


def _bound(site: S, handler: Callable[[S, Request, re.Match[str]], Response]) -> Handler:
    def run(req: Request, m: re.Match[str]) -> Response:
        return handler(site, req, m)

    return run


def read_only_when_archived(
    routes: list[Route],
    group: str,
    archived: Callable[[re.Match[str]], bool],
    message: str,
) -> list[Route]:
    """The routes, with every write to an archived repository refused with a 403 (both forges
    make an archived repository read-only; the caller cites the forge's own words)."""

    def guarded(method: str, handler: Handler) -> Handler:
        def run(req: Request, m: re.Match[str]) -> Response:
            if method != "GET" and group in m.groupdict() and archived(m):
                raise HttpError(403, message)
            return handler(req, m)

        return run

    return [Route(r.method, r.pattern, guarded(r.method, r.handler)) for r in routes]


def paginate(
    request: Request, items: list[Any], *, default: int | None = None, cap: int = 100
) -> tuple[list[Any], dict[str, str]]:
    """Slice `items` by page/per_page and describe the other pages in headers. `default` and
    `cap`: the endpoint's own page size and largest page (GitHub's notifications: 50 and 50)."""
    if default is None:
        default = 30 if request.platform == "github" else 20
    try:
        per_page = min(cap, max(1, int(request.query.get("per_page", str(default)))))
        page = max(1, int(request.query.get("page", "1")))
    except ValueError as exc:
        raise HttpError(400, "invalid pagination parameter") from exc
    last = max(1, -(-len(items) // per_page))
    chunk = items[(page - 1) * per_page : page * per_page]

    def link(number: int) -> str:
        query = {**request.query, "page": str(number), "per_page": str(per_page)}
        return f"{request.base_url}{request.path}?{urlencode(query)}"

    rels = []
    if page < last:
        rels += [f'<{link(page + 1)}>; rel="next"', f'<{link(last)}>; rel="last"']
    if page > 1:
        rels += [f'<{link(1)}>; rel="first"', f'<{link(page - 1)}>; rel="prev"']
    headers = {"Link": ", ".join(rels)} if rels else {}
    if request.platform == "gitlab":
        headers.update(
            {
                "x-page": str(page),
                "x-per-page": str(per_page),
                "x-total": str(len(items)),
                "x-total-pages": str(last),
                "x-next-page": str(page + 1) if page < last else "",
                "x-prev-page": str(page - 1) if page > 1 else "",
            }
        )
    return chunk, headers


def body_text(
    request: Request, status: int, message: str, maximum: int | None = None, too_long: str = ""
) -> str:
    """The request's `body` field (a comment's or a note's text): a string, not empty and at
    most `maximum` characters; else the forge's own refusal (`status`, `message`)."""
    body = (request.body or {}).get("body")
    if not isinstance(body, str) or not body:
        raise HttpError(status, message)
    if maximum is not None and len(body) > maximum:
        raise HttpError(status, too_long or f"{message}: body is too long")
    return body


def parse_time(value: str) -> datetime | None:
    """An ISO 8601 query parameter (UTC when it names no zone), or None when it is not one."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
