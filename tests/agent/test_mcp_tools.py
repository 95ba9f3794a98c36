"""MCP tool names and the schema budget (bot/agent/mcp_tools.py)."""

from __future__ import annotations

from bot.agent.mcp_tools import tool_name, within
from bot.agent.tools import RawArgs, Tool, Toolbox, ToolResult
from bot.context.tokens import TokenCounter
from bot.llm.base import ToolCall

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
