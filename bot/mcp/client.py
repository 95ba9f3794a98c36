"""One connection to one MCP server: the official `mcp` SDK behind a synchronous face.

The SDK is asynchronous (anyio); the daemon's workers are threads. Each connection runs its
own event loop on a thread of its own, and one task there (`_serve`) enters the transport and
the session and leaves them again when the connection closes, as anyio requires of a context
manager. A call is a coroutine handed to that loop; the caller's thread waits in short slices
and asks its `watch` between them, so a pause, a stop, SIGTERM or a lost lease cancels the
call at once: the SDK then sends the server `notifications/cancelled`. Closing gives a stdio
server the SDK's shutdown (stdin closed, then SIGTERM, then SIGKILL, each bounded).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types
import pydantic
from jsonschema import Draft202012Validator, SchemaError
from jsonschema.validators import validator_for
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from bot.core.log import get_logger
from bot.mcp.base import (
    CallResult,
    Endpoint,
    HttpEndpoint,
    McpCancelled,
    McpDied,
    McpError,
    McpTimeout,
    McpUnavailable,
    RemoteTool,
    StdioEndpoint,
)
from bot.mcp.spawn import clean_argv

log = get_logger(__name__)
WAIT_SLICE = 0.05  # seconds between two looks at the watch while a call runs
CLOSE_SECONDS = 10.0  # the SDK's stdio shutdown is bounded at about 6 s
MAX_TOOL_PAGES = 20
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
T = TypeVar("T")
Watch = Callable[[], bool]  # True: cancel the call now (it may raise, which cancels it too)


class McpClient:
    """`start()` once, then `call()` from any one thread at a time, then `close()`."""

    def __init__(self, name: str, endpoint: Endpoint, timeout: float) -> None:
        self.name = name
        self.endpoint = endpoint
        self.timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"mcp-{name}", daemon=True
        )
        self._session: ClientSession | None = None
        self._closing: asyncio.Event | None = None
        self._served: concurrent.futures.Future[None] | None = None
        self.dead = False  # the connection ended on its own

    def start(self) -> list[RemoteTool]:
        """Spawn or connect, shake hands, list the tools; McpUnavailable if any step fails."""
        self._thread.start()
        ready: concurrent.futures.Future[list[RemoteTool]] = concurrent.futures.Future()
        self._served = asyncio.run_coroutine_threadsafe(self._serve(ready), self._loop)
        try:
            return ready.result(timeout=self.timeout + 5)
        except concurrent.futures.TimeoutError:
            self.close()
            raise McpUnavailable(f"no answer within {self.timeout:g} s") from None
        except McpUnavailable:
            self.close()
            raise

    def call(self, tool: str, arguments: dict[str, Any], watch: Watch) -> CallResult:
        session = self._session
        if session is None or self.dead:
            raise McpDied("the server is not running")
        future = asyncio.run_coroutine_threadsafe(self._call(session, tool, arguments), self._loop)
        while True:
            try:
                return future.result(timeout=WAIT_SLICE)
            except concurrent.futures.TimeoutError:
                pass
            except concurrent.futures.CancelledError:
                raise McpCancelled("the call was cancelled") from None
            try:
                cancel = watch()
            except BaseException:
                future.cancel()
                raise
            if cancel:
                future.cancel()
                raise McpCancelled("the call was cancelled")

    def close(self) -> None:
        """End the connection (and a stdio server's process); safe to call twice."""
        if not self._thread.is_alive():
            return
        closing = self._closing
        if closing is not None:
            self._loop.call_soon_threadsafe(closing.set)
        served = self._served
        if served is not None:
            with contextlib.suppress(BaseException):
                served.result(timeout=CLOSE_SECONDS)
            if not served.done():
                served.cancel()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=CLOSE_SECONDS)
        if not self._thread.is_alive():
            self._loop.close()

    # -- on the connection's loop -------------------------------------------------------------

    async def _serve(self, ready: concurrent.futures.Future[list[RemoteTool]]) -> None:
        self._closing = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                # The contexts hold task groups: entered outside the deadline's cancel scope.
                read, write = await stack.enter_async_context(_transport(self.endpoint))
                session = await stack.enter_async_context(ClientSession(read, write))
                with anyio.fail_after(self.timeout):
                    await session.initialize()
                    tools = await _list_tools(self.name, session)
                self._session = session
                ready.set_result(tools)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(McpUnavailable(_reason(exc)))
            self.dead = True
            if not isinstance(exc, Exception):
                raise

    async def _call(
        self, session: ClientSession, tool: str, arguments: dict[str, Any]
    ) -> CallResult:
        try:
            with anyio.fail_after(self.timeout):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            raise McpTimeout(f"no answer within {self.timeout:g} s (mcp.timeout_seconds)") from None
        except MCPError as exc:
            if exc.code == mcp_types.CONNECTION_CLOSED:
                self.dead = True
                raise McpDied("the server stopped during the call") from None
            return CallResult(f"error {exc.code}: {exc.error.message}", is_error=True)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.dead = True
            raise McpDied("the server stopped during the call") from None
        except Exception as exc:  # noqa: BLE001 - the SDK's own checks of a result: an error the model reads
            return CallResult(f"error: {type(exc).__name__}: {exc}", is_error=True)
        return _result(result)


@asynccontextmanager
async def _transport(endpoint: Endpoint) -> AsyncIterator[Any]:
    if isinstance(endpoint, HttpEndpoint):
        async with (
            # The SDK's advice: the headers on a client of our own; its default timeouts.
            httpx2.AsyncClient(headers=dict(endpoint.headers), timeout=HTTP_TIMEOUT) as http,
            streamable_http_client(endpoint.url, http_client=http) as streams,
        ):
            yield streams
        return
    assert isinstance(endpoint, StdioEndpoint)
    argv = clean_argv(endpoint.argv, endpoint.env)
    with contextlib.ExitStack() as files:
        # A server's stderr is its own business (it may print what it was given): not ours.
        errlog = files.enter_context(open(os.devnull, "w"))
        cwd = endpoint.cwd or Path(files.enter_context(TemporaryDirectory(prefix="bot-mcp-")))
        params = StdioServerParameters(
            command=argv[0], args=argv[1:], env=dict(endpoint.env), cwd=cwd
        )
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams


async def _list_tools(name: str, session: ClientSession) -> list[RemoteTool]:
    tools: list[RemoteTool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        for tool in page.tools:
            problem = schema_problem(tool.input_schema)
            if problem is not None:
                # An endpoint refuses a whole request over one bad function schema: the tool
                # is not offered, the others are.
                log.warning("mcp_tool_refused", server=name, tool=tool.name, reason=problem)
                continue
            hints = tool.annotations
            tools.append(
                RemoteTool(
                    tool.name,
                    tool.description or "",
                    dict(tool.input_schema),
                    bool(hints is not None and hints.read_only_hint),
                )
            )
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def schema_problem(schema: Any) -> str | None:
    """Why a tool's input schema cannot be offered (None: it can): an object schema, valid
    in its JSON Schema dialect (2020-12 unless it names another; no reference is fetched)."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "its input schema is not an object schema"
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        return f"its input schema is not valid JSON Schema: {exc.message[:200]}"
    return None


def _result(result: Any) -> CallResult:
    parts = [_block(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts) or "(no content)"
    return CallResult(text, is_error=bool(result.is_error))


def _block(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]"
    if kind == "resource_link":
        return f"[resource {block.uri}]"
    if kind == "resource":
        inner = block.resource
        text = getattr(inner, "text", None)
        return str(text) if text is not None else f"[resource {inner.uri}: binary, not shown]"
    return f"[{kind or 'unknown'} content, not shown]"


def _reason(exc: BaseException) -> str:
    """Why a start failed, in one line without the server's own output (it may hold secrets
    it was given)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, McpError):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "no answer to the handshake in time"
    if isinstance(exc, MCPError):
        if exc.code == mcp_types.CONNECTION_CLOSED:
            return "the server exited before it answered the handshake"
        return f"the handshake failed: error {exc.code}"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"the server answered HTTP {exc.response.status_code}"
    if isinstance(exc, httpx2.HTTPError):
        return f"cannot connect: {type(exc).__name__}"
    if isinstance(exc, pydantic.ValidationError):
        return "its answer is not valid MCP (the SDK refused its handshake or tool list)"
    if isinstance(exc, OSError):
        return f"cannot start: {exc.strerror or type(exc).__name__}"
    return f"cannot start: {type(exc).__name__}"
