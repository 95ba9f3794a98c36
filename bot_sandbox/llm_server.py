"""A scripted OpenAI-compatible server over real HTTP on 127.0.0.1.

Serves `/v1/models` and `/v1/chat/completions`. Replies come from a queue of scripted items
(content, tool calls, HTTP faults, delays); when the queue is empty, a `policy` function of the
request decides (deterministic, so a restarted daemon gets the same answers for the same
conversation). Every request body is logged so tests can inspect what the model saw.

With `context_window` set, the server refuses a request longer than its window the way real
endpoints do: HTTP 400 with the body of the chosen `refusal` style (see `refusal_body`).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Reply = dict[str, Any]
Policy = Callable[[dict[str, Any]], Reply]


@dataclass
class Scripted:
    """One scripted answer: a reply, or an HTTP error `status` (with optional headers)."""

    content: str | None = None
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, arguments)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw_arguments: bool = False  # send arguments exactly as given (to script malformed JSON)
    body: dict[str, Any] | None = None  # the error body for a non-200 `status`
    # `usage` is optional in a chat completion (the `openai` SDK's
    # `types/chat/chat_completion.py`: `usage: Optional[CompletionUsage] = None`); some
    # endpoints leave it out. False: the answer carries none.
    usage: bool = True


def count_tool_results(request: dict[str, Any]) -> int:
    return sum(1 for m in request.get("messages", []) if m.get("role") == "tool")


def stepping_policy(steps: int = 2, note: str = "Progress note", delay: float = 0.0) -> Policy:
    """Post `steps` progress notes through the post_comment tool, then finish."""

    def policy(request: dict[str, Any]) -> Reply:
        done = count_tool_results(request)
        if done < steps:
            return {
                "tool_calls": [("post_comment", {"body": f"{note} {done + 1}"})],
                "delay": delay,
            }
        humans = sum(
            1
            for m in request.get("messages", [])
            if m.get("role") == "user" and "@" in str(m.get("content"))
        )
        return {
            "tool_calls": [
                ("finish", {"summary": f"Finished after {done} steps; {humans} user turns."})
            ]
        }

    return policy


def demo_policy() -> Policy:
    """The sandbox's model: plans, reads the file the issue names, edits it, finishes."""
    script: list[tuple[str, dict[str, Any]]] = [
        (
            "update_plan",
            {"items": [{"text": "Read demo/greet.py"}, {"text": "Add the exclamation mark"}]},
        ),
        ("read_file", {"path": "demo/greet.py"}),
        (
            "edit_file",
            {"path": "demo/greet.py", "old": '"Hello " + name', "new": '"Hello " + name + "!"'},
        ),
        (
            "update_plan",
            {
                "items": [
                    {"text": "Read demo/greet.py", "done": True},
                    {"text": "Add the exclamation mark", "done": True},
                ]
            },
        ),
        ("finish", {"summary": "greet() now ends with an exclamation mark (demo/greet.py)."}),
    ]

    test = ("run_command", {"command": "python3 -m unittest -q demo.test_greet"})

    def policy(request: dict[str, Any]) -> Reply:
        tools = {t["function"]["name"] for t in request.get("tools") or []}
        steps = [*script[:3], test, *script[3:]] if "run_command" in tools else script
        step = min(count_tool_results(request), len(steps) - 1)
        return {"tool_calls": [steps[step]]}

    return policy


class LLMServer:
    def __init__(self, policy: Policy | None = None, *, host: str = "127.0.0.1", port: int = 0):
        self.policy = policy or stepping_policy()
        self.script: list[Scripted] = []
        self.requests: list[dict[str, Any]] = []
        self.arrived: list[float] = []  # time.monotonic() of each request, same order
        self.model = "scripted-model"
        # Refuse requests longer than this, counted as the model's own tokenizer would:
        # cl100k tokens times `token_ratio` (open models often count more than cl100k does).
        self.context_window: int | None = None
        self.token_ratio = 1.0
        self.refusal: Literal["openai", "vllm", "llamacpp"] = "openai"
        self.refused: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.closing = threading.Event()  # ends scripted delays when the server stops
        self._httpd = _QuietServer((host, port), _make_handler(self))
        self._httpd.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> LLMServer:
        # A short poll interval: stop() (every test's teardown) waits for one.
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        self.closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def push(self, *items: Scripted) -> None:
        with self._lock:
            self.script.extend(items)

    def next_answer(self, request: dict[str, Any]) -> Scripted:
        with self._lock:
            self.requests.append(request)
            self.arrived.append(time.monotonic())
            if self.script:
                return self.script.pop(0)
        reply = self.policy(request)
        return Scripted(
            reply.get("content"),
            list(reply.get("tool_calls", [])),
            delay=float(reply.get("delay", 0)),
            usage=bool(reply.get("usage", True)),
        )

    def prompt_tokens(self, request: dict[str, Any]) -> int:
        from bot.context.tokens import TokenCounter

        counter = TokenCounter()
        counted = counter.messages(request.get("messages", [])) + counter.tools(
            request.get("tools") or []
        )
        return int(counted * self.token_ratio)

    def refusal_for(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The 400 body for a request over `context_window`, or None when it fits."""
        if self.context_window is None:
            return None
        prompt = self.prompt_tokens(request)
        completion = int(request.get("max_tokens") or 0)
        body = refusal_body(self.refusal, self.context_window, prompt, completion)
        if body is not None:
            with self._lock:
                self.refused.append(request)
        return body

    def seen_text(self) -> str:
        """Everything the model was shown, for "did the model see X" assertions."""
        with self._lock:
            return "\n".join(
                str(m.get("content") or "") for r in self.requests for m in r.get("messages", [])
            )


def completion(model: str, answer: Scripted, request: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {
            "id": f"call_{uuid.uuid4().hex[:10]}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": arguments if answer.raw_arguments else json.dumps(arguments),
            },
        }
        for name, arguments in answer.tool_calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": answer.content}
    if calls:
        message["tool_calls"] = calls
    prompt_chars = sum(len(str(m.get("content") or "")) for m in request.get("messages", []))
    completion_chars = len(answer.content or "") + sum(len(str(a)) for _, a in answer.tool_calls)
    answered: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_chars // 4 + 1,
            "completion_tokens": completion_chars // 4 + 1,
            "total_tokens": (prompt_chars + completion_chars) // 4 + 2,
        },
    }
    if not answer.usage:
        del answered["usage"]
    return answered


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (a daemon that abandoned a slow call) is part of the tests.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def refusal_body(
    style: Literal["openai", "vllm", "llamacpp"], window: int, prompt: int, completion: int
) -> dict[str, Any] | None:
    """What each endpoint answers (with HTTP 400) to a request longer than its window.

    - OpenAI: prompt over the window; `code: context_length_exceeded`
      (platform.openai.com/docs/guides/error-codes; wording as in
      github.com/chathub-dev/chathub/issues/126).
    - vLLM: prompt plus `max_tokens` over the window; `{"object": "error", ...}` at the top
      level (vllm/entrypoints/openai/serving_engine.py `_validate_input`; wording as in
      github.com/vllm-project/vllm/issues/20409).
    - llama.cpp server: prompt at or over `n_ctx`; `type: exceed_context_size_error` with
      `n_prompt_tokens` and `n_ctx` (tools/server/server-context.cpp).
    """
    if style == "openai" and prompt > window:
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {prompt} tokens. Please reduce the length of the messages."
        )
        return {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    if style == "vllm" and prompt + completion > window:
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the "
            "completion). Please reduce the length of the messages or completion."
        )
        return {
            "object": "error",
            "message": message,
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    if style == "llamacpp" and prompt >= window:
        message = (
            f"request ({prompt} tokens) exceeds the available context size ({window} tokens), "
            "try increasing it"
        )
        return {
            "error": {
                "code": 400,
                "message": message,
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt,
                "n_ctx": window,
            }
        }
    return None


def _make_handler(server: LLMServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._json(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": server.model, "object": "model", "owned_by": "sandbox"}],
                    },
                )
            else:
                self._json(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._json(400, {"error": {"message": "invalid JSON"}})
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._json(404, {"error": {"message": "not found"}})
                return
            refusal = server.refusal_for(request)
            if refusal is not None:
                self._json(400, refusal)
                return
            answer = server.next_answer(request)
            if answer.delay:
                server.closing.wait(answer.delay)
            if answer.status != 200:
                body = answer.body or {"error": {"message": "scripted fault"}}
                self._json(answer.status, body, answer.headers)
                return
            self._json(200, completion(server.model, answer, request))

        def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return _Handler
