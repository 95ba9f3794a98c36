"""The replay rule of a tool call cut off by a restart (bot/task/journal.py `run_call`)."""

from __future__ import annotations

from bot.agent.tools import RawArgs, Tool, Toolbox, ToolResult
from bot.llm.base import ToolCall
from bot.model.state import TaskState
from bot.model.thread import Kind, Platform, TaskKey
from bot.task.journal import run_call, settled

KEY = TaskKey(Platform.GITHUB, "acme/app", Kind.ISSUE, 1)


class Recorder:
    """Tools that count their calls, and the saves with what the state held at each."""

    def __init__(self, state: TaskState) -> None:
        self.state = state
        self.calls: list[str] = []
        self.saves: list[tuple[dict[str, str], dict[str, str]]] = []

    def tool(self, name: str, once: bool) -> Tool:
        def run(_args: RawArgs, call: ToolCall) -> ToolResult:
            self.calls.append(call.name)
            return ToolResult(f"{call.name} done")

        return Tool(name, "d", RawArgs, run, parameters={"type": "object"}, once=once)

    def save(self) -> None:
        self.saves.append((dict(self.state.tool_started), dict(self.state.tool_journal)))


def setup() -> tuple[TaskState, Recorder, Toolbox]:
    state = TaskState(key=str(KEY))
    rec = Recorder(state)
    return state, rec, Toolbox([rec.tool("effect", once=True), rec.tool("look", once=False)])


def test_a_once_tool_is_journaled_at_its_start_and_its_end() -> None:
    state, rec, box = setup()
    result = run_call(state, rec.save, box, ToolCall("c1", "effect", "{}"))
    assert result.content == "effect done" and rec.calls == ["effect"]
    # Saved before it ran (started, no result), then with its result.
    assert rec.saves == [({"c1": "effect"}, {}), ({"c1": "effect"}, {"c1": "effect done"})]
    settled(state, "c1")
    assert state.tool_started == {} and state.tool_journal == {}


def test_a_cut_once_call_is_not_made_again_and_the_model_is_told() -> None:
    state, rec, box = setup()
    state.tool_started["c1"] = "effect"  # started in an earlier process; no result recorded
    result = run_call(state, rec.save, box, ToolCall("c1", "effect", "{}"))
    assert rec.calls == [] and not result.ok
    assert "may or may not have happened" in result.content
    assert result.outcome == "cut off, not made again"  # what the timeline says


def test_a_recorded_result_is_answered_from_the_journal() -> None:
    state, rec, box = setup()
    state.tool_started["c1"] = "effect"
    state.tool_journal["c1"] = "effect done earlier"
    assert run_call(state, rec.save, box, ToolCall("c1", "effect", "{}")).content == (
        "effect done earlier"
    )
    assert rec.calls == []


def test_a_tool_that_is_not_once_is_simply_run_again() -> None:
    state, rec, box = setup()
    first = run_call(state, rec.save, box, ToolCall("c2", "look", "{}"))
    again = run_call(state, rec.save, box, ToolCall("c2", "look", "{}"))  # the cut turn again
    assert first.content == again.content == "look done" and rec.calls == ["look", "look"]
    assert rec.saves == [] and state.tool_started == {}
