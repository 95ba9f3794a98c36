"""`update_plan`: one progress comment per task, edited in place, never a new comment per step."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from bot.agent.tools import Args, Tool, ToolResult
from bot.forge.base import Forge
from bot.forge.errors import NotFound
from bot.forge.types import TaskKey
from bot.llm.base import ToolCall
from bot.log import get_logger
from bot.posting import Poster, marker
from bot.state import PlanItem, TaskState

log = get_logger(__name__)


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


def plan_tool(forge: Forge, key: TaskKey, poster: Poster, state: Callable[[], TaskState]) -> Tool:
    def run(args: UpdatePlanArgs, call: ToolCall) -> ToolResult:
        task = state()
        task.plan = [PlanItem(text=i.text, done=i.done) for i in args.items]
        body = render_progress(task)
        if task.progress_comment_id is not None:
            # Editing is idempotent: repeating it after a crash changes nothing.
            seq = task.progress_seq or 0
            try:
                text = f"{poster.withhold(body)}\n\n{marker(key, seq)}"
                forge.edit_comment(key, task.progress_comment_id, text)
            except NotFound:
                # Someone deleted it: post it anew (replaying the edit would fail forever).
                log.info("progress_comment_reposted", deleted=task.progress_comment_id)
                task.progress_comment_id = None
        if task.progress_comment_id is None:
            poster.post("progress", body, call.id)
        done = sum(1 for i in task.plan if i.done)
        return ToolResult(f"plan updated ({done}/{len(task.plan)} done)")

    return Tool(
        "update_plan", "Show your plan as a checklist in one progress comment.", UpdatePlanArgs, run
    )
