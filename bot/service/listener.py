"""One HTTP listener: waitress (a production WSGI server) serving a WSGI application from a
background thread; and `Routes`, which lets one listener serve several applications by path.

The webhooks (`bot/service/webhooks/server.py`) and the task page (`bot/service/ui/`) are both
served this way; when their `listen` addresses are the same, one listener serves both
(`bot/service/listeners.py`).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

import waitress

from bot.core.log import get_logger

log = get_logger(__name__)
Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]


class Listener:
    """Serves `app` on host:port (`listen`, port 0: any free one) in a background thread.
    Binding happens here, so a taken port fails before anything starts. `sock`: an already
    bound socket to serve instead (the sandbox binds first, to know its port). `serves`: what
    it serves (`webhooks`, `ui`), each logged as `<name>_listening` when it starts."""

    def __init__(
        self,
        app: WSGIApp,
        listen: str,
        *,
        serves: tuple[str, ...],
        max_body: int,
        threads: int = 4,
        sock: socket.socket | None = None,
    ) -> None:
        self.serves = serves
        where: dict[str, Any]
        if sock is not None:
            where = {"sockets": [sock]}
        else:
            host, _, port = listen.rpartition(":")
            where = {"host": host.strip("[]") or "127.0.0.1", "port": int(port)}
        self._server = waitress.create_server(
            app,
            **where,
            threads=threads,
            max_request_body_size=max_body,
            ident="coding-agent-bot",
            # Idle or trickling connections are dropped after 10 s (waitress keeps them 120 s
            # by default), so a client holding many open cannot lock real requests out.
            channel_timeout=10,
            connection_limit=500,
        )
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = self._server.effective_host
        if ":" in str(host):
            host = f"[{host}]"
        return f"http://{host}:{self._server.effective_port}"

    def start(self) -> Listener:
        name = "+".join(self.serves)
        self._thread = threading.Thread(target=self._server.run, name=name, daemon=True)
        self._thread.start()
        for served in self.serves:
            log.info(f"{served}_listening", url=self.url)
        return self

    def stop(self) -> None:
        self._server.close()
        if self._thread is not None:
            self._thread.join(timeout=5)


class Routes:
    """A WSGI application that hands each request to the first application whose path prefix
    it starts with, else to `default`."""

    def __init__(self, routes: list[tuple[str, WSGIApp]], default: WSGIApp) -> None:
        self.routes = routes
        self.default = default

    def __call__(self, environ: Environ, start: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO") or "")
        for prefix, app in self.routes:
            if path.startswith(prefix):
                return app(environ, start)
        return self.default(environ, start)
