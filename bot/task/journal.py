"""The replay rule for a tool call, one function: answered from the journal, told it may not
have happened, or carried out (and, for a `once` tool, journaled at its start and its end).

A `once` tool's effects are outside the task's own records (an MCP tool not marked
read-only: a ticket filed, a row written). Its start is saved before it runs and its result
right after, before the result enters the conversation; so after a crash, a SIGKILL, a lost
lease or a pause that cancelled it, a call with a start but no result is never made again:
the model is told it may not have happened. A read-only tool (`readOnlyHint`) or a built-in
one is simply asked again (docs/architecture.md, "Tool calls after a restart").
"""

from __future__ import annotations

from collections.abc import Callable

from bot.agent.tools import Toolbox, ToolResult
from bot.core.log import get_logger
from bot.llm.base import ToolCall
from bot.model.state import TaskState

log = get_logger(__name__)


def cut_off(name: str) -> str:
    return (
        f"error: the call to {name} was cut off (the bot was paused, stopped or restarted "
        "while it ran) before its result was recorded: it may or may not have happened. "
        "It is not made again; check its effect before you call it again."
    )


def run_call(
    state: TaskState, save: Callable[[], None], toolbox: Toolbox, call: ToolCall
) -> ToolResult:
    journaled = state.tool_journal.get(call.id)
    if journaled:
        return ToolResult(journaled)
    if call.id in state.tool_started:
        log.warning("tool_call_cut_off", tool=call.name, call_id=call.id)
        return ToolResult(cut_off(call.name), ok=False, outcome="cut off, not made again")
    tool = toolbox.tools.get(call.name)
    if tool is None or not tool.once:
        return toolbox.execute(call)
    state.tool_started[call.id] = call.name
    save()
    result = toolbox.execute(call)
    if not result.interrupted:
        state.tool_journal[call.id] = result.content
        save()
    return result


def settled(state: TaskState, call_id: str) -> None:
    """The call's result is in the conversation: nothing of it stays in the journal."""
    state.tool_journal.pop(call_id, None)
    state.tool_started.pop(call_id, None)
