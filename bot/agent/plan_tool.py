"""`update_plan`: one progress comment per task, edited in place, never a new comment per step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydantic import Field

from bot.agent.tools import Args, Tool, ToolResult
from bot.llm.base import ToolCall
from bot.model.state import PlanItem, TaskState


class PlanItemArgs(Args):
    text: str = Field(min_length=1, max_length=300)
    done: bool = False


class UpdatePlanArgs(Args):
    items: list[PlanItemArgs] = Field(min_length=1, max_length=30)


def render_progress(state: TaskState) -> str:
    lines = ["**Working on it.** Plan:", ""]
    lines += [f"- [{'x' if item.done else ' '}] {item.text}" for item in state.plan]
    current = next((item.text for item in state.plan if not item.done), None)
    lines += ["", f"Step {state.step}; tokens used so far: {state.usage.total}."]
    if current:
        lines.insert(1, f"Now: {current}")
    return "\n".join(lines)


class ProgressComment(Protocol):
    """Where the plan is shown: one comment in the thread, posted once, edited after."""

    def show(self, body: str, call_id: str) -> None: ...


def plan_tool(progress: ProgressComment, state: Callable[[], TaskState]) -> Tool:
    def run(args: UpdatePlanArgs, call: ToolCall) -> ToolResult:
        task = state()
        task.plan = [PlanItem(text=i.text, done=i.done) for i in args.items]
        progress.show(render_progress(task), call.id)
        done = sum(1 for i in task.plan if i.done)
        return ToolResult(f"plan updated ({done}/{len(task.plan)} done)")

    return Tool(
        "update_plan", "Show your plan as a checklist in one progress comment.", UpdatePlanArgs, run
    )
