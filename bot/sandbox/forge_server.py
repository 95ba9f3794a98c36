"""A stateful GitHub + GitLab REST emulator over real HTTP on 127.0.0.1.

GitHub is served at the root (`/user`, `/repos/...`), GitLab under `/api/v4`. It does what the
daemon's clients rely on: token auth, `Link` pagination with its own host (plus GitLab's
`x-next-page`), ETags and 304s, rate-limit headers, injectable faults (5xx, connection resets,
timeouts, primary/secondary rate limits, GitLab 429), and a request log tests can count.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from bot.sandbox.world import SCommit, SRepo, SUser, World, tarball


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


@dataclass
class Fault:
    """One scripted failure. `kind`: "status", "reset" (connection dropped before handling),
    "timeout" (no answer for `delay` seconds), or "drop" (the request takes effect, then the
    connection drops: the client cannot know it succeeded)."""

    kind: str = "status"
    status: int = 503
    platform: str | None = None
    method: str | None = None
    path: str | None = None  # regex searched in the request path
    times: int = 1
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay: float = 5.0

    def matches(self, platform: str, method: str, path: str) -> bool:
        return (
            self.times > 0
            and (self.platform is None or self.platform == platform)
            and (self.method is None or self.method == method)
            and (self.path is None or re.search(self.path, path) is not None)
        )


@dataclass(frozen=True)
class RecordedRequest:
    platform: str
    method: str
    path: str
    query: dict[str, str]
    status: int
    at: float  # time.monotonic()
    conditional: bool


class ForgeServer:
    """Owns the HTTP server, the `World`, faults and the request log."""

    def __init__(self, world: World | None = None, *, host: str = "127.0.0.1", port: int = 0):
        from bot.sandbox import github_api, gitlab_api  # routes reference the server

        self.world = world or World()
        self.faults: list[Fault] = []
        self.random_fault_rate = 0.0
        self.random_fault_delay = 3.0
        self._random = random.Random(1234)
        self.requests: list[RecordedRequest] = []
        # Called after a request changed the world and before the answer is sent: crash tests
        # kill the daemon here, "between posting a comment and saving state".
        self.before_response: Callable[[RecordedRequest], None] | None = None
        self._blocked: dict[str, tuple[float, Fault]] = {}
        self._lock = threading.Lock()
        self.rate_limit = 5000
        self._used: dict[str, int] = {}
        self.routes: dict[str, list[Route]] = {
            "github": github_api.routes(self),
            "gitlab": gitlab_api.routes(self),
        }
        self._httpd = _QuietServer((host, port), _make_handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ForgeServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ForgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ----------------------------------------------------------------------------

    def add_fault(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def rate_limit_for(self, platform: str, seconds: float, kind: str = "primary") -> None:
        """Answer every request to `platform` with a rate-limit error for `seconds`."""
        reset = math.ceil(time.time() + seconds)  # whole epoch seconds, as the real headers
        if platform == "gitlab":
            fault = Fault(
                status=429,
                headers={"RateLimit-Reset": str(reset), "RateLimit-Remaining": "0"},
                body={"message": "429 Too Many Requests"},
            )
        elif kind == "secondary":
            fault = Fault(
                status=403,
                headers={"retry-after": str(round(seconds))},
                body={
                    "message": "You have exceeded a secondary rate limit. Please wait a few "
                    "minutes before you try again.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits",
                },
            )
        else:
            fault = Fault(
                status=403,
                headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
                body={
                    "message": "API rate limit exceeded for user ID 1.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits",
                },
            )
        with self._lock:
            # The block ends when the advertised reset comes (GitLab/primary) or after
            # `retry-after` seconds (secondary), measured on the wall clock like the headers.
            until = time.time() + seconds if kind == "secondary" else float(reset)
            self._blocked[platform] = (until, fault)

    def count(
        self,
        platform: str | None = None,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
    ) -> int:
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (platform is None or r.platform == platform)
                and (method is None or r.method == method)
                and (path is None or re.search(path, r.path))
                and (status is None or r.status == status)
            )

    def clear_log(self) -> None:
        with self._lock:
            self.requests.clear()

    # -- dispatch -----------------------------------------------------------------------------

    def pick_fault(self, platform: str, method: str, path: str) -> Fault | None:
        with self._lock:
            blocked = self._blocked.get(platform)
            if blocked is not None:
                if time.time() < blocked[0]:
                    return blocked[1]
                del self._blocked[platform]
            for fault in self.faults:
                if fault.matches(platform, method, path):
                    fault.times -= 1
                    return fault
            if self.random_fault_rate and self._random.random() < self.random_fault_rate:
                kind = self._random.choice(["500", "502", "503", "reset", "timeout", "drop"])
                if kind.isdigit():
                    return Fault(status=int(kind), body={"message": "injected"})
                return Fault(kind=kind, delay=self.random_fault_delay)
        return None

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def rate_headers(self, platform: str, token: str, *, spend: bool) -> dict[str, str]:
        with self._lock:
            if spend:
                self._used[token] = self._used.get(token, 0) + 1
            used = self._used.get(token, 0)
        remaining = max(0, self.rate_limit - used)
        reset = str(int(time.time()) + 3600)
        if platform == "gitlab":
            return {
                "RateLimit-Limit": str(self.rate_limit),
                "RateLimit-Remaining": str(remaining),
                "RateLimit-Reset": reset,
            }
        return {
            "x-ratelimit-limit": str(self.rate_limit),
            "x-ratelimit-remaining": str(remaining),
            "x-ratelimit-reset": reset,
            "x-ratelimit-used": str(used),
            "x-ratelimit-resource": "core",
        }

    def used(self, token: str) -> int:
        with self._lock:
            return self._used.get(token, 0)


def archive_response(repo: SRepo, commit: SCommit, prefix: str) -> Response:
    """A .tar.gz of `commit` under `prefix/` (or the crafted archive a hostile test set)."""
    data = (
        repo.archive_override
        if repo.archive_override is not None
        else tarball(prefix, commit.files)
    )
    return Response(raw=data, headers={"Content-Type": "application/x-gzip"})


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that vanish (killed daemons, injected resets) are part of the tests.
        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError | OSError):
            super().handle_error(request, client_address)


def paginate(request: Request, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
    """Slice `items` by page/per_page and describe the other pages in headers."""
    try:
        per_page = min(
            100,
            max(
                1,
                int(request.query.get("per_page", "30" if request.platform == "github" else "20")),
            ),
        )
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


def _make_handler(server: ForgeServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the request log is `server.requests`

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def do_PATCH(self) -> None:
            self._dispatch("PATCH")

        def do_PUT(self) -> None:
            self._dispatch("PUT")

        def do_DELETE(self) -> None:
            self._dispatch("DELETE")

        def _dispatch(self, method: str) -> None:
            split = urlsplit(self.path)
            path = split.path
            query = dict(parse_qsl(split.query, keep_blank_values=True))
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            platform = "gitlab" if path.startswith("/api/v4/") else "github"
            conditional = "If-None-Match" in self.headers
            fault = server.pick_fault(platform, method, path)
            if fault is not None and fault.kind == "drop":
                self._handle(method, path, query, raw, platform)  # it happens, unanswered
                now = time.monotonic()
                record = RecordedRequest(platform, method, path, query, 0, now, conditional)
                server.record(record)
                self._reset()
                return
            if fault is not None and fault.kind in ("reset", "timeout"):
                server.record(
                    RecordedRequest(platform, method, path, query, 0, time.monotonic(), conditional)
                )
                if fault.kind == "timeout":
                    time.sleep(fault.delay)
                self._reset()
                return
            if fault is not None:
                response = Response(fault.status, fault.body, dict(fault.headers))
            else:
                response = self._handle(method, path, query, raw, platform)
            record = RecordedRequest(
                platform, method, path, query, response.status, time.monotonic(), conditional
            )
            server.record(record)
            if server.before_response is not None:
                server.before_response(record)
            self._send(response)

        def _handle(
            self, method: str, path: str, query: dict[str, str], raw: bytes, platform: str
        ) -> Response:
            token = self._token(platform)
            user = server.world.user_by_token(token) if token else None
            if user is None and path.startswith("/_codeload/"):
                user = server.world.user("codeload")  # archive links carry their own access
            if user is None:
                message = "Bad credentials" if platform == "github" else "401 Unauthorized"
                return Response(401, {"message": message})
            try:
                body = (
                    json.loads(raw)
                    if raw and "json" in (self.headers.get("Content-Type") or "")
                    else None
                )
            except json.JSONDecodeError:
                return Response(400, {"message": "Problems parsing JSON"})
            if body is None and raw and platform == "gitlab":
                body = dict(parse_qsl(raw.decode(), keep_blank_values=True))
            request = Request(
                method, path, query, dict(self.headers), body, raw, user, server.url, platform
            )
            response = self._route(request)
            if response.status == 304:
                response.headers.update(server.rate_headers(platform, token, spend=False))
            else:
                response.headers.update(server.rate_headers(platform, token, spend=True))
            return response

        def _route(self, request: Request) -> Response:
            for route in server.routes[request.platform]:
                if route.method != request.method:
                    continue
                match = route.pattern.fullmatch(request.path)
                if match is None:
                    continue
                try:
                    with server.world.lock:
                        response = route.handler(request, match)
                        if response.paginate:
                            response.body, extra = paginate(request, response.body)
                            response.headers.update(extra)
                except HttpError as exc:
                    return Response(exc.status, {"message": exc.message}, exc.headers)
                return self._conditional(request, response)
            return Response(404, {"message": "Not Found"})

        def _conditional(self, request: Request, response: Response) -> Response:
            if request.method != "GET" or response.status != 200 or response.raw is not None:
                return response
            payload = json.dumps(response.body, sort_keys=True).encode()
            etag = f'W/"{hashlib.sha1(payload).hexdigest()}"'
            response.headers["ETag"] = etag
            if request.headers.get("If-None-Match") == etag:
                return Response(304, None, {"ETag": etag})
            return response

        def _token(self, platform: str) -> str:
            if platform == "gitlab":
                return self.headers.get("PRIVATE-TOKEN") or self._bearer()
            return self._bearer()

        def _bearer(self) -> str:
            value = self.headers.get("Authorization") or ""
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() in ("token", "bearer") else ""

        def _send(self, response: Response) -> None:
            if response.raw is not None:
                data = response.raw
                content_type = response.headers.pop("Content-Type", "application/octet-stream")
            elif response.status == 304 or (response.body is None and response.status == 204):
                data = b""
                content_type = ""
            else:
                data = json.dumps(response.body).encode()
                content_type = "application/json; charset=utf-8"
            self.send_response(response.status)
            if content_type:
                self.send_header("Content-Type", content_type)
            for key, value in response.headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if data:
                self.wfile.write(data)

        def _reset(self) -> None:
            # SO_LINGER with zero timeout makes close() send RST: a real connection reset.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()

    return _Handler
