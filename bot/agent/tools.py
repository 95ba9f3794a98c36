"""Tools the model may call: JSON-schema'd, strictly validated, errors answered as results."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.llm.base import ToolCall, ToolSpec


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RawArgs(BaseModel):
    """Arguments checked by whoever receives them (an MCP server, against its own schema):
    here only that they are a JSON object."""

    model_config = ConfigDict(extra="allow", frozen=True)

    def given(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class PostCommentArgs(Args):
    body: str = Field(min_length=1, max_length=60_000, description="Markdown text of the note")
    reply_to: str | None = Field(
        default=None,
        max_length=100,
        description="To answer a review comment in its review thread: its id, shown as "
        "`reply_to: <id>`. Leave out to post in the main conversation.",
    )


class FinishArgs(Args):
    summary: str = Field(min_length=1, max_length=60_000, description="Final answer for the thread")


@dataclass(frozen=True)
class ToolResult:
    content: str
    ok: bool = True
    malformed: bool = False
    finish: str | None = None
    # The call was cancelled before it answered (pause, stop, SIGTERM): no result to record.
    interrupted: bool = False
    # What a command did, in our own words ("passed", "failed (exit status 1)"): recorded
    # beside the result for the timeline and the report, which never show its output.
    outcome: str | None = None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[BaseModel]
    run: Callable[[Any, ToolCall], ToolResult]
    # A JSON schema given as it is (an MCP server's), instead of the one of `args`.
    parameters: dict[str, Any] | None = None
    # Effects outside the task's own records (an MCP tool not marked read-only): its start is
    # journaled, and a call cut off before its result was recorded is never made again
    # (bot/task/journal.py). The built-in tools are safe to redo or carry their own markers.
    once: bool = False

    def spec(self) -> ToolSpec:
        schema = self.args.model_json_schema() if self.parameters is None else self.parameters
        return ToolSpec(self.name, self.description, _without_titles(schema))


def _without_titles(node: Any) -> Any:
    """Pydantic titles every model and field ("Body" for `body`): tokens that tell the model
    nothing, paid on every request, which matters in a 2,048-token window."""
    if isinstance(node, dict):
        return {
            k: _without_titles(v)
            for k, v in node.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_without_titles(v) for v in node]
    return node


class Toolbox:
    def __init__(self, tools: list[Tool]) -> None:
        self.tools = {tool.name: tool for tool in tools}

    def specs(self) -> list[ToolSpec]:
        return [tool.spec() for tool in self.tools.values()]

    def execute(self, call: ToolCall) -> ToolResult:
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(self.tools))
            return ToolResult(
                f"error: unknown tool {call.name!r}; available: {names}", ok=False, malformed=True
            )
        try:
            raw = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return ToolResult(
                f"error: arguments of {call.name} are not valid JSON ({exc.msg} at {exc.pos})",
                ok=False,
                malformed=True,
            )
        try:
            args = tool.args.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            return ToolResult(
                f"error: invalid arguments for {call.name}: {problems}", ok=False, malformed=True
            )
        return tool.run(args, call)


def finish_tool() -> Tool:
    return Tool(
        "finish",
        "End the task. The summary is posted in the thread as the final answer.",
        FinishArgs,
        lambda args, _call: ToolResult("finishing", finish=args.summary),
    )


def post_comment_tool(post: Callable[[str, str, str | None], str]) -> Tool:
    """`post(body, call_id, reply_to)` posts exactly once and returns the tool result text."""

    def run(args: PostCommentArgs, call: ToolCall) -> ToolResult:
        return ToolResult(post(args.body, call.id, args.reply_to))

    return Tool(
        "post_comment", "Post a note in the thread (not the final answer).", PostCommentArgs, run
    )


class ReadCommentsArgs(Args):
    numbers: list[int] = Field(
        min_length=1, max_length=50, description="comment numbers, e.g. [3, 4]"
    )


def read_comments_tool(read: Callable[[list[int]], str]) -> Tool:
    return Tool(
        "read_comments",
        "Read thread comments by their numbers (for comments the opening context left out).",
        ReadCommentsArgs,
        lambda args, _call: ToolResult(read(args.numbers)),
    )
