"""MCP tool names and the schema budget (bot/agent/mcp_tools.py)."""

from __future__ import annotations

from bot.agent.mcp_tools import Offer, mcp_tools, tool_name, within
from bot.agent.tools import RawArgs, Tool, Toolbox, ToolResult
from bot.context.tokens import TokenCounter
from bot.llm.base import ToolCall
from bot.mcp import RemoteTool, ServerHandle, StdioEndpoint

COUNTER = TokenCounter("cl100k_base")


def raw_tool(name: str, description: str = "d", properties: int = 1) -> Tool:
    schema = {
        "type": "object",
        "properties": {
            f"p{n}": {"type": "string", "description": "x " * 20} for n in range(properties)
        },
    }
    return Tool(name, description, RawArgs, lambda a, _c: ToolResult(repr(a.given())), schema)


def test_names_are_function_names_an_endpoint_accepts() -> None:
    assert tool_name("git", "git_log") == "mcp__git__git_log"
    assert tool_name("docs", "search.v2/all") == "mcp__docs__search_v2_all"
    assert len(tool_name("s", "x" * 100)) == 64


def test_schemas_that_do_not_fit_are_left_out_in_order() -> None:
    small, big, after = raw_tool("a"), raw_tool("b", properties=200), raw_tool("c")
    cost = COUNTER.tools([small.spec().openai()])
    kept, left_out = within([small, big, after], COUNTER, cost * 3)
    assert [t.name for t in kept] == ["a", "c"] and left_out == ["b"]


def test_a_raw_schema_is_offered_as_given_and_arguments_pass_through() -> None:
    tool = raw_tool("mcp__s__t")
    assert tool.spec().parameters["properties"]["p0"]["type"] == "string"
    box = Toolbox([tool])
    assert box.execute(ToolCall("1", "mcp__s__t", '{"p0": "v", "extra": 1}')).content == (
        "{'p0': 'v', 'extra': 1}"
    )
    assert box.execute(ToolCall("2", "mcp__s__t", "[1]")).malformed  # not an object


def offered(trusted: bool, *tools: RemoteTool) -> list[Tool]:
    endpoint = StdioEndpoint(("never-started",))
    server = ServerHandle("s", lambda: endpoint, timeout=1)  # no call reaches it here
    return mcp_tools([Offer(server, tools, None, trusted)], COUNTER, 100, lambda: False)


def test_a_read_only_hint_counts_only_from_a_trusted_server() -> None:
    schema = {"type": "object"}
    hinted, plain = RemoteTool("get", "", schema, True), RemoteTool("put", "", schema, False)
    trusted = {t.name: t.once for t in offered(True, hinted, plain)}
    untrusted = {t.name: t.once for t in offered(False, hinted, plain)}
    # `once`: journaled at its start, never made again after a cut (bot/task/journal.py).
    assert trusted == {"mcp__s__get": False, "mcp__s__put": True}
    assert untrusted == {"mcp__s__get": True, "mcp__s__put": True}


def test_names_the_same_after_the_cut_keep_the_first_tool() -> None:
    schema = {"type": "object"}
    long = "x" * 70
    tools = offered(
        True,
        RemoteTool(long + "a", "one", schema, True),
        RemoteTool(long + "b", "two", schema, True),
    )
    assert [(t.name, t.description) for t in tools] == [(tool_name("s", long), "one")]
