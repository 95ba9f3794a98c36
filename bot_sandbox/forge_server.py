"""A stateful GitHub + GitLab REST emulator over real HTTP on 127.0.0.1.

GitHub is served at the root (`/user`, `/repos/...`), GitLab under `/api/v4`. It does what the
daemon's clients rely on: token auth, `Link` pagination with its own host (plus GitLab's
`x-next-page`), ETags and 304s, rate-limit headers, injectable faults (5xx, connection resets,
timeouts, primary/secondary rate limits, GitLab 429), and a request log tests can count.

Archives go where the real forges send them. github.com answers `GET /repos/{o}/{r}/tarball/{ref}`
with a 302 to another host (`codeload.github.com/{o}/{r}/legacy.tar.gz/{sha}`, with a short-lived
`?token=` for private repositories: docs.github.com/rest/repos/contents, "Download a repository
archive (tar)": "these links are temporary and expire after five minutes"); here that host is a
second listener reached as `localhost` (another host name than the API's `127.0.0.1`, so clients
treat it as a different origin). GitHub Enterprise Server redirects to `/_codeload/...` on its own
host (`archive_host="same"`). GitLab.com allows 5 archive downloads a minute per user
(docs.gitlab.com/user/gitlab_com, "Repository archives"; the rate limiter answers 429 with no
Retry-After: gitlab-org/gitlab!25750).
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
from datetime import datetime
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from bot_sandbox import hook_scope, mentions
from bot_sandbox.archives import ArchiveLinks
from bot_sandbox.github import routes as github_routes
from bot_sandbox.github_app import AppEmulator
from bot_sandbox.gitlab import routes as gitlab_routes
from bot_sandbox.http import HttpError, Request, Response, Route, paginate
from bot_sandbox.inbox import SNotification, STodo
from bot_sandbox.search_limit import SearchLimit
from bot_sandbox.world import SUser, World


@dataclass
class Fault:
    """One scripted failure. `kind`: "status", "reset" (connection dropped before handling),
    "timeout" (no answer for `delay` seconds), "drop" (the request takes effect, then the
    connection drops: the client cannot know it succeeded), or "hook" (`action` runs, e.g. a
    person pushes, then the request is handled normally: a race between the bot's reads and
    writes)."""

    kind: str = "status"
    status: int = 503
    platform: str | None = None
    method: str | None = None
    path: str | None = None  # regex searched in the request path
    times: int = 1
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay: float = 5.0
    action: Callable[[], object] | None = None

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
    authorized: bool = False  # the request carried a token header (Authorization/PRIVATE-TOKEN)


class ForgeServer:
    """Owns the HTTP server, the `World`, faults and the request log."""

    def __init__(
        self,
        world: World | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        archive_host: str = "codeload",
        gitlab_archives_per_minute: int | None = 5,
        gitlab_archive_window: float = 60.0,
        clock: Callable[[], float] = time.time,
    ):
        if archive_host not in ("codeload", "same"):
            raise ValueError(f"archive_host must be 'codeload' or 'same', not {archive_host!r}")

        self.world = world or World()
        # The server's wall clock (epoch seconds): its `Date` header and the search limit's
        # window; a test shares a fake one with the daemon to run minutes without waiting.
        self.clock = clock
        self.search_limit = SearchLimit(clock)
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
        self.archive_host = archive_host
        self.archive_links = ArchiveLinks()
        self.gitlab_archives_per_minute = gitlab_archives_per_minute
        self.gitlab_archive_window = gitlab_archive_window
        self._archive_downloads: dict[str, list[float]] = {}
        # Discovery state (bot_sandbox/mentions.py fills it when a comment mentions a user).
        self.notifications: dict[str, list[SNotification]] = {}
        self.todos: dict[str, list[STodo]] = {}
        self.notifications_served: dict[str, datetime] = {}  # login -> Last-Modified sent
        # `X-Poll-Interval` of GitHub's notifications: 60 in GitHub's examples; tests set it.
        self.notifications_poll_interval = 60
        self.repo_labels: dict[str, set[str]] = {}  # labels that exist in a repository
        self.watchers: dict[str, set[str]] = {}  # GitHub repository -> logins watching it
        self.labels_created: list[tuple[str, str, str]] = []  # (platform, repo, name)
        self.github_app: AppEmulator | None = None  # see serve_github_app
        mentions.watch(self)
        # The routes get the server as their `Site` (bot_sandbox/site.py), never import it.
        self.routes: dict[str, list[Route]] = {
            "github": github_routes.routes(self),
            "gitlab": gitlab_routes.routes(self),
            "codeload": github_routes.codeload_routes(self),
        }
        self._httpd = _QuietServer((host, port), _make_handler(self, "api"))
        self._httpd.daemon_threads = True
        self._codeload = (
            _QuietServer((host, 0), _make_handler(self, "codeload"))
            if archive_host == "codeload"
            else None
        )
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def codeload_url(self) -> str:
        """Where archive links point: another host name than `url` (github.com's codeload)."""
        if self._codeload is None:
            return self.url
        port = self._codeload.server_address[1]
        return f"http://localhost:{port}"

    def start(self) -> ForgeServer:
        for httpd in (self._httpd, self._codeload):
            if httpd is not None:
                # A short poll interval: stop() (every test's teardown) waits for one.
                thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
                thread.start()
                self._threads.append(thread)
        return self

    def stop(self) -> None:
        for httpd in (self._httpd, self._codeload):
            if httpd is not None:
                httpd.shutdown()
                httpd.server_close()

    def __enter__(self) -> ForgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_github_app(self, slug: str, **options: Any) -> AppEmulator:
        """Serve a GitHub App named `slug` (its key pair is generated); see github_app."""
        self.github_app = AppEmulator(self.world, slug, **options)
        return self.github_app

    # -- scripting ----------------------------------------------------------------------------

    def add_fault(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def rate_limit_for(self, platform: str, seconds: float, kind: str = "primary") -> None:
        """Answer every request to `platform` with a rate-limit error for `seconds`."""
        reset = math.ceil(time.time() + seconds)  # whole epoch seconds, as the real headers
        if platform == "gitlab":
            # RackAttack's API throttle names itself (lib/gitlab/rack_attack.rb).
            fault = Fault(
                status=429,
                headers={
                    "RateLimit-Reset": str(reset),
                    "RateLimit-Remaining": "0",
                    "RateLimit-Name": "throttle_authenticated_api",
                },
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
                headers={
                    "x-ratelimit-remaining": "0",
                    "x-ratelimit-reset": str(reset),
                    "x-ratelimit-resource": "core",
                },
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
            # GitLab.com's throttles count per minute: the advertised reset is within 60 s.
            reset = str(int(time.time()) + 60)
            # Named since GitLab sends the throttle's headers on every answer
            # (gitlab-org/gitlab!209485: `RateLimit-Name: throttle_authenticated_api`).
            return {
                "RateLimit-Limit": str(self.rate_limit),
                "RateLimit-Remaining": str(remaining),
                "RateLimit-Reset": reset,
                "RateLimit-Name": "throttle_authenticated_api",
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

    def take_gitlab_archive(self, login: str) -> bool:
        """Count one archive download for `login`; False when over GitLab.com's per-minute cap."""
        if self.gitlab_archives_per_minute is None:
            return True
        now = time.monotonic()
        with self._lock:
            window = self.gitlab_archive_window
            recent = [t for t in self._archive_downloads.get(login, []) if now - t < window]
            allowed = len(recent) < self.gitlab_archives_per_minute
            if allowed:
                recent.append(now)
            self._archive_downloads[login] = recent
            return allowed


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that vanish (killed daemons, injected resets) are part of the tests.
        exc = sys.exc_info()[1]
        if not isinstance(exc, ConnectionError | OSError):
            super().handle_error(request, client_address)


def _make_handler(server: ForgeServer, role: str) -> type[BaseHTTPRequestHandler]:
    """`role` "api" serves both forges' APIs; "codeload" serves only archive links."""

    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the request log is `server.requests`

        def date_time_string(self, timestamp: float | None = None) -> str:
            # The `Date` of every answer, on the server's clock (whole seconds, as HTTP has).
            return formatdate(server.clock() if timestamp is None else timestamp, usegmt=True)

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
            if role == "codeload":
                platform = "codeload"
            else:
                platform = "gitlab" if path.startswith("/api/v4/") else "github"
            conditional = "If-None-Match" in self.headers
            authorized = any(self.headers.get(h) for h in ("Authorization", "PRIVATE-TOKEN"))
            fault = server.pick_fault(platform, method, path)
            if fault is not None and fault.kind == "hook":
                if fault.action is not None:
                    fault.action()
                fault = None
            if fault is not None and fault.kind == "drop":
                self._handle(method, path, query, raw, platform)  # it happens, unanswered
                now = time.monotonic()
                record = RecordedRequest(
                    platform, method, path, query, 0, now, conditional, authorized
                )
                server.record(record)
                self._reset()
                return
            if fault is not None and fault.kind in ("reset", "timeout"):
                server.record(
                    RecordedRequest(
                        platform, method, path, query, 0, time.monotonic(), conditional, authorized
                    )
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
                platform,
                method,
                path,
                query,
                response.status,
                time.monotonic(),
                conditional,
                authorized,
            )
            server.record(record)
            if server.before_response is not None:
                server.before_response(record)
            self._send(response)

        def _handle(
            self, method: str, path: str, query: dict[str, str], raw: bytes, platform: str
        ) -> Response:
            user: SUser | None
            if platform == "codeload" or path.startswith("/_codeload/"):
                # Archive links carry their own access (`?token=`); a token header is ignored.
                if not server.archive_links.valid(query.get("token", "")):
                    return Response(404, {"message": "Not Found"})
                token, user = "", server.world.user("codeload")
            else:
                token = self._token(platform)
                user = server.world.user_by_token(token) if token else None
                if user is None and token and platform == "github" and server.github_app:
                    user = server.github_app.user_for(token, path)  # a JWT or an app token
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
            # GitLab's webhook ids are per request (bot_sandbox/hook_scope.py).
            with hook_scope.request(self.headers.get("X-Gitlab-Event-UUID")):
                response = self._route(request)
            if platform == "codeload":
                return response  # not the API: no rate-limit headers
            if "x-ratelimit-resource" in response.headers:
                return response  # answered in a bucket of its own (search), core unspent
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
            # As GitHub: the ETag covers the body only, not the Link header, and a 304 carries
            # no Link. A full page 1 stays "not modified" when a page 2 appears behind it
            # (app-sre/github-mirror#57: "the response is a 304 and the request does not
            # include any pagination headers that are supposed to be there").
            payload = json.dumps(response.body, sort_keys=True).encode()
            etag = f'W/"{hashlib.sha1(payload).hexdigest()}"'
            response.headers["ETag"] = etag
            if request.headers.get("If-None-Match") == etag:
                # A bucket of its own (search) still says where its window stands.
                limits = {k: v for k, v in response.headers.items() if k.startswith("x-ratelimit")}
                return Response(304, None, {"ETag": etag, **limits})
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
