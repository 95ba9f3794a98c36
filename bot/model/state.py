"""Per-task state: the truth about a task, saved by a `Store` after every step; labels follow it.

Where a store keeps it (`task.json` under `state_dir`, or the `tasks` table of the database):
docs/architecture.md, "What is kept where".
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum

from pydantic import BaseModel, Field

from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.model.thread import TaskKey


class Status(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"
    DONE = "done"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (Status.STOPPED, Status.DONE, Status.FAILED)


def now_iso(*, clock: Clock = SYSTEM_CLOCK) -> str:
    """`clock`'s time as the state's timestamps have it. The stores stamp `updated_at` and the
    poster `PendingPost.created_at` on their injected clock; the model's default factories
    (a state or a post made without a time) read the system clock, through `bot.core.clock`."""
    return clock.now().isoformat(timespec="seconds").replace("+00:00", "Z")


class PendingPost(BaseModel):
    """A comment we are about to post: if we die, the marker tells whether it landed."""

    seq: int
    purpose: str
    body: str
    call_id: str | None = None  # the tool call this post carries out, if any
    reply_to: str | None = None  # answer in this comment's review thread
    created_at: str = Field(default_factory=lambda: now_iso())


class PlanItem(BaseModel):
    text: str
    done: bool = False


class Usage(BaseModel):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def plus(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class Cap(StrEnum):
    """What a run spends, each with its cap: reaching one pauses the task and asks."""

    STEPS = "steps"  # model calls, `llm.max_steps`
    TOKENS = "tokens"  # prompt + completion tokens, `llm.max_tokens_per_task`
    COST = "cost"  # what those tokens cost at `llm.price`, `llm.max_cost_per_task`


class Allowance(BaseModel):
    """What the run may spend before it pauses, as limits on its own counters (`step`, the
    usage's tokens, their cost): None is the configured cap. A writer's resume after a cap sets
    each to what was used at the resume plus what it grants (bot/task/allowance.py)."""

    steps: int | None = None
    tokens: int | None = None
    cost: Decimal | None = None


class TaskState(BaseModel):
    key: str
    run: int = 1
    status: Status = Status.RUNNING
    step: int = 0
    # Comment id -> updated_at of the version delivered (or deliberately skipped).
    seen: dict[str, str] = Field(default_factory=dict)
    comments_since: str | None = None
    initialized: bool = False
    next_seq: int = 1
    pending_post: PendingPost | None = None
    posted: dict[str, str] = Field(default_factory=dict)  # seq -> comment id
    # Results of side-effecting tool calls that happened but are not yet in the conversation:
    # after a crash the call is answered from here instead of being carried out twice.
    tool_journal: dict[str, str] = Field(default_factory=dict)
    # Calls with effects outside our records (MCP tools not marked read-only) that started
    # and have no journaled result yet: call id -> tool name (bot/task/journal.py).
    tool_started: dict[str, str] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)  # this run's
    # The task's earlier runs together (carried over when a new run starts), so that a task's
    # cost is known without reading its archived runs (zero in states saved before it existed).
    earlier_usage: Usage = Field(default_factory=Usage)
    allowance: Allowance = Field(default_factory=Allowance)
    capped: Cap | None = None  # the cap that paused the task; cleared by the resume
    # When the cap's comment was posted (the forge's time): only a resume written from then
    # on answers it (bot/task/safepoint.py); None while that comment is still owed.
    asked_at: str | None = None
    malformed_streak: int = 0
    llm_failures: int = 0  # consecutive model calls that failed after the client's retries
    # Consecutive runs that ended on a forge error, and when the next may start (backoff).
    forge_failures: int = 0
    retry_at: str | None = None
    check_rounds: int = 0  # times failing checks were handed back to the model this run
    reason: str | None = None
    final_answer: str | None = None
    labels_applied: str | None = None  # the status the labels last reflected
    # The work: pinned commit, changeset (path -> text, None = deleted), plan, publication.
    base_sha: str | None = None
    base_branch: str | None = None
    changes: dict[str, str | None] = Field(default_factory=dict)
    plan: list[PlanItem] = Field(default_factory=list)
    progress_comment_id: str | None = None
    progress_seq: int | None = None
    branch: str | None = None
    # Where `branch` is: its repository (None: the task's own; a fork's path) and the kind of
    # destination (bot/repo/destination.py `Where`; None in states saved before it existed).
    branch_repo: str | None = None
    branch_kind: str | None = None
    commit_sha: str | None = None
    change_request_url: str | None = None
    previous_summary: str | None = None
    # A finished task's changeset lives in this file beside task.json (kept for audit), so that
    # the task.json of a finished task stays small.
    changes_file: str | None = None
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)

    def task_key(self) -> TaskKey:
        return TaskKey.parse(self.key)
