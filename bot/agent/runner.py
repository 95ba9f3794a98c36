"""The step loop of one task, with its safe points.

    S  controls: labels + slash commands from writers -> stop / pause?
    S  comments: detector.check() -> append to conversation (fsync) -> mark seen
       model:    one LLM call with the fitted conversation -> append reply
       tools:    each call executed, result appended; S after each one
       final:    S once more; new comments -> another turn, else finish

State is saved after every step. Labels change only after the state on disk says so.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import NoReturn

import structlog

from bot.agent.history import SUMMARY_HEADER, compact, needs_compaction, visible
from bot.agent.instructions import author_trusted, repository_instructions
from bot.agent.pinning import pin
from bot.agent.plan_tool import plan_tool
from bot.agent.publish import PublishError, publish
from bot.agent.repo_tools import repo_tools
from bot.agent.shrink import StillTooLong, WindowCap, complete_or_shrink
from bot.agent.tools import (
    Toolbox,
    ToolResult,
    finish_tool,
    post_comment_tool,
    read_comments_tool,
)
from bot.agent.workbench import read_comments, target_workspace, task_workspace
from bot.agent.workspace import Workspace
from bot.comments import CommentDetectionManager, Identity, NewComment, Trust
from bot.config import Settings
from bot.context.budget import truncate
from bot.context.engine import initial_context, opening_budget
from bot.context.tokens import TokenCounter
from bot.context.window import WindowTooSmall, fit
from bot.controls import Decision, decide, split_commands
from bot.forge._util import format_time
from bot.forge.base import Forge
from bot.forge.errors import AuthError, ForgeError
from bot.forge.types import TaskKey, Thread
from bot.labels import sync_labels
from bot.llm.base import LLMClient, LLMError, LLMFatal, LLMReply, Message, ToolCall
from bot.log import get_logger
from bot.metrics import Metrics
from bot.posting import Poster
from bot.prompts import load_prompt
from bot.state import StateStore, Status, TaskState

log = get_logger(__name__)
MAX_MALFORMED = 3
MAX_LLM_FAILURES = 3


class Outcome(StrEnum):
    DONE = "done"
    FAILED = "failed"
    PAUSED = "paused"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"  # daemon stopping or a transient fault: resumes later


class _Halt(Exception):
    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome


@dataclass(frozen=True)
class Deps:
    forge: Forge
    store: StateStore
    llm: LLMClient
    settings: Settings
    identity: Identity
    counter: TokenCounter
    stop: threading.Event
    metrics: Metrics = field(default_factory=Metrics)


class TaskRunner:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def run(self, key: TaskKey, fresh: bool = False) -> Outcome:
        with (
            self.deps.store.task_lock(key),
            structlog.contextvars.bound_contextvars(task=str(key), repo=key.repo),
        ):
            try:
                outcome = _Run(self.deps, key).execute(fresh)
            except AuthError:
                raise
            except ForgeError as exc:
                log.warning("task_interrupted", reason="forge", error=str(exc), status=exc.status)
                return Outcome.INTERRUPTED
            except OSError as exc:
                # Disk full or read-only state dir: the previous state file is intact (atomic
                # writes), and the task resumes from it once the disk is usable again.
                log.error(
                    "state_save_failed",
                    error=f"{type(exc).__name__}: {exc.strerror}",
                    path=str(exc.filename or ""),
                )
                return Outcome.INTERRUPTED
            log.info("task_outcome", outcome=outcome.value)
            return outcome


class _Run:
    def __init__(self, deps: Deps, key: TaskKey) -> None:
        self.deps = deps
        self.key = key
        self.settings = deps.settings
        self.store = deps.store
        self.forge = deps.forge
        self.conversation = deps.store.conversation(key)
        self.state = TaskState(key=str(key))
        self.labels: frozenset[str] = frozenset()
        trust = Trust.from_settings(self.settings.access)
        cap = max(
            256, (self.settings.llm.context_window - self.settings.llm.reserve_output_tokens) // 4
        )
        self.detector = CommentDetectionManager(
            self.forge,
            key,
            deps.identity,
            trust,
            self.conversation,
            shorten=lambda text: truncate(text, cap, deps.counter),
        )
        self.poster = Poster(self.forge, key, deps.identity.login, self.store, self.state)
        self.thread: Thread | None = None
        self.window_cap = WindowCap()  # lowered when the endpoint refuses a request as too long
        self._workspace: Workspace | None = None
        self.toolbox = self._tools()

    def _tools(self) -> Toolbox:
        tools = [
            finish_tool(),
            post_comment_tool(self._post_note),
            read_comments_tool(self._read_comments),
        ]
        tools.append(plan_tool(self.forge, self.key, self.poster, lambda: self.state))
        if self._workspace is not None:
            budget = self.settings.agent.tool_result_tokens
            tools += repo_tools(self._workspace, self.deps.counter, budget)
        return Toolbox(tools)

    def workspace(self) -> Workspace:
        if self._workspace is None:
            assert self.state.base_sha is not None
            self._workspace = task_workspace(
                self.forge, self.key, self.state.base_sha, self.state.changes, self.settings
            )
            self.toolbox = self._tools()
        return self._workspace

    def _read_comments(self, numbers: list[int]) -> str:
        entries = self.conversation.entries()
        legend: dict[str, str] = entries[1].get("legend", {}) if len(entries) > 1 else {}
        budget = self.settings.agent.tool_result_tokens
        trust = self.detector.trust
        return read_comments(
            self.forge, self.key, legend, numbers, trust, self.deps.counter, budget
        )

    def _post_note(self, body: str, call_id: str, reply_to: str | None = None) -> str:
        self.poster.post("note", body, call_id, reply_to)
        return self.state.tool_journal[call_id]

    # -- lifecycle ----------------------------------------------------------------------------

    def execute(self, fresh: bool) -> Outcome:
        loaded = self.store.load(self.key)
        if loaded is not None and not (fresh and loaded.status.terminal):
            self._adopt(loaded)
            self.detector.restore_state({"seen": loaded.seen, "since": loaded.comments_since})
        elif loaded is not None:
            # Handed back after it finished: a new run that continues the previous one's work.
            self.store.archive_run(self.key, loaded.run)
            self._adopt(
                TaskState(
                    key=str(self.key),
                    run=loaded.run + 1,
                    next_seq=loaded.next_seq,
                    branch=loaded.branch,
                    change_request_url=loaded.change_request_url,
                    previous_summary=loaded.final_answer or loaded.reason,
                )
            )
        if self.state.pending_post is not None:
            self.poster.deliver(look_up=True)  # a post the previous process may have made
        thread = self.forge.get_thread(self.key)
        self.thread = thread
        self.labels = thread.labels
        if self.state.status.terminal:
            self._sync_labels()
            return Outcome(self.state.status.value)
        try:
            if not self.state.initialized:
                self._initialize(thread)
            elif self.state.labels_applied != self.state.status:
                self._sync_labels()
            self.workspace()
            return self._loop()
        except _Halt as halt:
            return halt.outcome

    def _adopt(self, state: TaskState) -> None:
        self.state = state
        self.poster.state = state
        self._workspace = None

    def _save(self) -> None:
        detector = self.detector.get_state()
        self.state.seen = detector["seen"]
        self.state.comments_since = detector["since"]
        self.store.save(self.state)

    def _sync_labels(self) -> None:
        sync_labels(self.forge, self.key, self.state.status, self.settings.labels, self.labels)
        self.state.labels_applied = self.state.status
        self.store.save(self.state)

    def _pin(self, thread: Thread) -> None:
        self.state.base_sha, self.state.base_branch = pin(self.forge, thread, self.state.branch)
        self._save()

    def _initialize(self, thread: Thread) -> None:
        self._pin(thread)
        existing = self.detector.initialize()
        talk = split_commands(existing).talk  # old commands are history, not orders
        workspace = self.workspace()
        trusted = author_trusted(self.forge, thread, self.detector.trust)
        system = self._system_prompt(workspace, thread, trusted)
        counter = self.deps.counter
        tools_tokens = counter.tools([s.openai() for s in self.toolbox.specs()])
        fixed = counter.count(system) + tools_tokens
        opening = initial_context(
            thread,
            self.detector.deliverable(talk),
            workspace,
            counter,
            opening_budget(self._budget(), fixed),
            previous=self.state.previous_summary,
            base=target_workspace(self.forge, thread, self.state.base_sha, self.settings),
            author_trusted=trusted,
        )
        log.info("context_plan", **opening.plan.log_fields())
        self.conversation.append({"role": "system", "content": system, "kind": "system"})
        self.conversation.append(
            {
                "role": "user",
                "content": opening.text,
                "kind": "initial",
                "comments": [{"id": c.comment.id, "updated_at": _ts(c)} for c in existing],
                "legend": {str(n): cid for n, cid in opening.legend.items()},
            }
        )
        self.detector.mark_seen(existing)
        self.state.initialized = True
        self.state.status = Status.RUNNING
        self._save()
        self._sync_labels()
        log.info("task_started", run=self.state.run, comments=len(existing))

    # -- the loop -----------------------------------------------------------------------------

    def _loop(self) -> Outcome:
        final = self._resume_turn()
        while True:
            if final is None:
                self._safe_point()
                self._check_caps()
                final = self._apply(self._call_model(), done=set())
                continue
            if self._safe_point():
                final = None  # a comment arrived before the final answer: another turn
                continue
            return self._finish(final)

    def _resume_turn(self) -> str | None:
        """After a restart, finish the turn the previous process was in the middle of.

        The last reply's tool calls without a result are executed now (they are idempotent:
        posts carry markers), so no step is lost or repeated and the conversation stays valid.
        """
        entries = self.conversation.entries()
        last = max((i for i, e in enumerate(entries) if e.get("role") == "assistant"), default=None)
        if last is None:
            return None
        after = entries[last + 1 :]
        if any(e.get("role") == "user" for e in after):
            return None  # new input arrived after that reply: the model speaks next
        entry = entries[last]
        calls = tuple(
            ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments") or "")
            for c in entry.get("tool_calls") or []
        )
        done = {str(e.get("tool_call_id")) for e in after if e.get("role") == "tool"}
        for call_id in done:
            self.state.tool_journal.pop(call_id, None)
        if calls and done >= {c.id for c in calls}:
            final = self._finish_argument(calls)
            return final
        return self._apply(LLMReply(entry.get("content"), calls), done=done)

    def _finish_argument(self, calls: tuple[ToolCall, ...]) -> str | None:
        for call in calls:
            if call.name == "finish":
                return self.toolbox.execute(call).finish
        return None

    def _safe_point(self, deliver: bool = True) -> bool:
        """Controls and comments. True if new comments were added to the conversation.

        With `deliver=False` (between the tool calls of one reply) comments wait: they are
        fetched again and delivered at the next full safe point.
        """
        if self.deps.stop.is_set():
            self._save()
            raise _Halt(Outcome.INTERRUPTED)
        fresh = self.detector.check_for_new_comments()
        self.labels = self.forge.get_thread(self.key).labels
        split = split_commands(fresh)
        talk, commands, controls = split.talk, split.commands, split.pure
        if controls:
            self.conversation.append(
                {
                    "role": "control",
                    "kind": "control",
                    "commands": [str(c) for c in commands],
                    "comments": [{"id": c.comment.id, "updated_at": _ts(c)} for c in controls],
                }
            )
            self.detector.mark_seen(controls)
        decision = decide(self.labels, commands, self.settings.labels)
        if decision is Decision.STOP:
            self._end(
                Status.STOPPED,
                "Stopped as asked. The task state is kept; re-add the trigger label to start over.",
            )
            raise _Halt(Outcome.STOPPED)
        if decision is Decision.PAUSE:
            self._pause()
            raise _Halt(Outcome.PAUSED)
        if self.state.status is Status.PAUSED:
            self._resume()
        if not talk or not deliver:
            self._save()
            return False
        self.detector.add_to_context(talk, step=self.state.step)
        self._save()
        now = datetime.now(UTC)
        for item in talk:
            delay = (now - item.comment.updated_at).total_seconds()
            self.deps.metrics.comment_delivery.observe(max(delay, 0.0))
        log.info("comments_delivered", count=len(talk), ids=[c.comment.id for c in talk])
        return True

    def _pause(self) -> None:
        if self.state.status is Status.PAUSED:
            self._save()
            if self.state.labels_applied != Status.PAUSED:
                self._sync_labels()
            return
        self.state.status = Status.PAUSED
        self._save()
        self._sync_labels()
        self.poster.post(
            "paused", "Paused. Remove the paused label or comment `/bot resume` to continue."
        )
        log.info("task_paused", step=self.state.step)

    def _resume(self) -> None:
        self.state.status = Status.RUNNING
        self._save()
        self._sync_labels()
        self.poster.post("resumed", "Resumed where I left off.")
        log.info("task_resumed", step=self.state.step)

    def _check_caps(self) -> None:
        llm = self.settings.llm
        if self.state.step >= llm.max_steps:
            self._fail(f"reached the step limit ({llm.max_steps} model calls, `llm.max_steps`)")
        if self.state.usage.total >= llm.max_tokens_per_task:
            used = self.state.usage.total
            self._fail(f"reached the token limit ({used} tokens, `llm.max_tokens_per_task`)")

    def _budget(self) -> int:
        """Tokens a request may use: the window minus the room kept for the answer."""
        llm = self.settings.llm
        return self.window_cap.limit(llm.context_window - llm.reserve_output_tokens)

    def _system_prompt(self, workspace: Workspace, thread: Thread, trusted: bool) -> str:
        assert self.state.base_sha is not None
        rules = repository_instructions(
            self.forge,
            thread,
            self.state.base_sha,
            workspace,
            trusted,
            self.deps.counter,
            self._budget() // 8,
        )
        return load_prompt("system.md").format(
            bot_login=self.deps.identity.login,
            task_ref=str(self.key),
            repo=self.key.repo,
            repo_rules=rules or "(none)",
        )

    def _messages(self, tools_tokens: int) -> list[Message]:
        counter, limit = self.deps.counter, self._budget() - tools_tokens
        entries = self.conversation.entries()
        messages = [m for _, m in visible(entries)]
        if needs_compaction(messages, limit, counter):
            try:
                summary = compact(entries, limit, counter, self.deps.llm)
            except LLMError as exc:
                log.warning("history_compaction_failed", error=str(exc))
                summary = None
            if summary is not None:
                self.conversation.append(summary)
                used = summary.pop("usage")
                self.state.usage.prompt_tokens += used["prompt_tokens"]
                self.state.usage.completion_tokens += used["completion_tokens"]
                self._save()
                messages = [m for _, m in visible(self.conversation.entries())]
        return messages

    def _call_model(self) -> LLMReply:
        specs = self.toolbox.specs()
        tools_tokens = self.deps.counter.tools([s.openai() for s in specs])
        try:
            # The window is a hard limit: whatever compaction left, `fit` enforces it.
            messages = self._messages(tools_tokens)
            summarized = len(messages) > 2 and str(messages[2].get("content")).startswith(
                SUMMARY_HEADER
            )
            pinned = 3 if summarized else 2
            fitted = fit(messages, self._budget(), self.deps.counter, tools_tokens, pinned)
        except WindowTooSmall as exc:
            self._fail(str(exc))
        try:
            # A "too long" refusal from the endpoint: shrink the request and retry, once.
            reply, fitted = complete_or_shrink(
                self.deps.llm,
                fitted,
                specs,
                lambda limit: fit(messages, limit, self.deps.counter, tools_tokens, pinned),
                self.window_cap,
            )
        except StillTooLong as exc:
            self._fail(str(exc))
        except LLMFatal as exc:
            self._fail(f"the model endpoint refused the request: {exc}")
        except LLMError as exc:
            self._llm_failure(str(exc))
        self.state.usage.calls += 1
        self.state.usage.prompt_tokens += reply.prompt_tokens
        self.state.usage.completion_tokens += reply.completion_tokens
        self.deps.metrics.llm_tokens.labels("prompt").inc(reply.prompt_tokens)
        self.deps.metrics.llm_tokens.labels("completion").inc(reply.completion_tokens)
        self.state.step += 1
        self.state.llm_failures = 0
        self.conversation.append({**reply.message(), "kind": "reply", "step": self.state.step})
        self._save()
        log.info(
            "model_replied",
            step=self.state.step,
            tool_calls=[c.name for c in reply.tool_calls],
            prompt_tokens=reply.prompt_tokens,
            fitted_tokens=fitted.tokens,
            omitted_turns=fitted.omitted_turns,
        )
        return reply

    def _llm_failure(self, error: str) -> NoReturn:
        self.state.llm_failures += 1
        failures = self.state.llm_failures
        if failures >= MAX_LLM_FAILURES:
            self._fail(f"the model could not be reached ({error})")
        self._save()
        log.warning("model_unavailable", error=error, failures=failures)
        raise _Halt(Outcome.INTERRUPTED)

    def _apply(self, reply: LLMReply, done: set[str]) -> str | None:
        """Run the reply's tool calls (those not `done` already); the final answer, if any."""
        if not reply.tool_calls:
            if reply.content and reply.content.strip():
                return reply.content.strip()  # a plain answer is a final answer
            self._malformed("empty reply")
            self.conversation.append(
                {
                    "role": "user",
                    "content": "Your reply was empty. Use a tool or call finish.",
                    "kind": "nudge",
                }
            )
            self._save()
            return None
        final = self._finish_argument(tuple(c for c in reply.tool_calls if c.id in done))
        malformed = 0
        pending = [c for c in reply.tool_calls if c.id not in done]
        for n, call in enumerate(pending):
            if n:
                self._safe_point(deliver=False)  # controls only: results must stay together
            journaled = self.state.tool_journal.get(call.id)
            result = ToolResult(journaled) if journaled else self.toolbox.execute(call)
            self.conversation.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": result.content,
                    "kind": "tool",
                    "name": call.name,
                }
            )
            self.state.tool_journal.pop(call.id, None)
            self._save()
            malformed += int(result.malformed)
            final = result.finish or final
        if pending and malformed == len(pending):
            self._malformed("every tool call was malformed")
        else:
            self.state.malformed_streak = 0
            self._save()
        return final

    def _malformed(self, what: str) -> None:
        self.state.malformed_streak += 1
        self._save()
        log.warning("model_output_malformed", what=what, streak=self.state.malformed_streak)
        if self.state.malformed_streak >= MAX_MALFORMED:
            self._fail(f"the model gave {MAX_MALFORMED} malformed replies in a row ({what})")

    # -- endings ------------------------------------------------------------------------------

    def _finish(self, answer: str) -> Outcome:
        answer = self.poster.withhold(answer)  # it goes into the request and commit too
        self.state.final_answer = answer
        assert self.thread is not None
        try:
            published = publish(
                self.forge,
                self.thread,
                self.state,
                self.workspace(),
                self.settings.agent,
                self._save,
                answer,
            )
        except PublishError as exc:  # a conflict with someone's push: stop, name it
            self._fail(str(exc))
        comment = answer
        if published is not None and published.request_url:
            comment += (
                f"\n\nDraft change request: {published.request_url} (branch `{published.branch}`)."
            )
        elif published is not None:
            comment += f"\n\nPushed commit {published.commit[:12]} to `{published.branch}`."
        self._end(Status.DONE, comment)
        return Outcome.DONE

    def _fail(self, reason: str) -> NoReturn:
        log.error("task_failed", reason=reason)
        self._end(Status.FAILED, f"I could not finish this task: {reason}.")
        raise _Halt(Outcome.FAILED)

    def _end(self, status: Status, comment: str) -> None:
        """Status and the closing comment's intent in one save, then post, then labels."""
        self.state.status = status
        self.state.reason = comment if status is not Status.DONE else None
        self.poster.intend(status.value, comment)
        self._save()
        self.poster.deliver(look_up=False)
        self._sync_labels()


def _ts(item: NewComment) -> str:
    return format_time(item.comment.updated_at)
