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
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import NoReturn

import structlog

from bot.agent.tools import Toolbox, ToolResult, finish_tool, post_comment_tool
from bot.comments import CommentDetectionManager, Identity, NewComment, Trust
from bot.config import Settings
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
from bot.posting import Poster
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


def load_prompt(name: str) -> str:
    return resources.files("bot.prompts").joinpath(name).read_text(encoding="utf-8")


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
                # Disk full or read-only state dir: the previous state file is intact.
                log.error("state_save_failed", error=f"{type(exc).__name__}: {exc.strerror}")
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
        access = self.settings.access
        trust = Trust(frozenset(u.lower() for u in access.allowed_users), access.untrusted_comments)
        self.detector = CommentDetectionManager(
            self.forge, key, deps.identity, trust, self.conversation
        )
        self.poster = Poster(self.forge, key, deps.identity.login, self.store, self.state)
        self.toolbox = Toolbox([finish_tool(), post_comment_tool(self._post_note)])

    def _post_note(self, body: str, call_id: str) -> str:
        self.poster.post("note", body, call_id)
        return self.state.tool_journal[call_id]

    # -- lifecycle ----------------------------------------------------------------------------

    def execute(self, fresh: bool) -> Outcome:
        loaded = self.store.load(self.key)
        if loaded is not None and not (fresh and loaded.status.terminal):
            self._adopt(loaded)
            self.detector.restore_state({"seen": loaded.seen, "since": loaded.comments_since})
        elif loaded is not None:
            self.store.archive_run(self.key, loaded.run)
            self._adopt(TaskState(key=str(self.key), run=loaded.run + 1, next_seq=loaded.next_seq))
        if self.state.pending_post is not None:
            self.poster.deliver(look_up=True)  # a post the previous process may have made
        thread = self.forge.get_thread(self.key)
        self.labels = thread.labels
        if self.state.status.terminal:
            self._sync_labels()
            return Outcome(self.state.status.value)
        try:
            if not self.state.initialized:
                self._initialize(thread)
            elif self.state.labels_applied != self.state.status:
                self._sync_labels()
            return self._loop()
        except _Halt as halt:
            return halt.outcome

    def _adopt(self, state: TaskState) -> None:
        self.state = state
        self.poster.state = state

    def _save(self) -> None:
        detector = self.detector.get_state()
        self.state.seen = detector["seen"]
        self.state.comments_since = detector["since"]
        self.store.save(self.state)

    def _sync_labels(self) -> None:
        sync_labels(self.forge, self.key, self.state.status, self.settings.labels, self.labels)
        self.state.labels_applied = self.state.status
        self.store.save(self.state)

    def _initialize(self, thread: Thread) -> None:
        existing = self.detector.initialize()
        talk, _old_commands = split_commands(existing)
        system = load_prompt("system.md").format(
            bot_login=self.deps.identity.login, task_ref=str(self.key), repo=self.key.repo
        )
        self.conversation.append({"role": "system", "content": system, "kind": "system"})
        self.conversation.append(
            {
                "role": "user",
                "content": render_thread(thread, self.detector.deliverable(talk), self.detector),
                "kind": "initial",
                "comments": [{"id": c.comment.id, "updated_at": _ts(c)} for c in existing],
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
        talk, commands = split_commands(fresh)
        if len(talk) != len(fresh):
            controls = [c for c in fresh if c not in talk]
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

    def _messages(self) -> list[Message]:
        allowed = ("system", "user", "assistant", "tool")
        messages: list[Message] = []
        for entry in self.conversation.entries():
            if entry.get("role") not in allowed or (
                entry.get("content") is None and not entry.get("tool_calls")
            ):
                continue
            message: Message = {"role": entry["role"], "content": entry.get("content")}
            for field in ("tool_calls", "tool_call_id"):
                if field in entry:
                    message[field] = entry[field]
            messages.append(message)
        return messages

    def _call_model(self) -> LLMReply:
        specs = self.toolbox.specs()
        tools_tokens = self.deps.counter.tools([s.openai() for s in specs])
        try:
            limit = self.settings.llm.context_window - self.settings.llm.reserve_output_tokens
            fitted = fit(self._messages(), limit, self.deps.counter, tools_tokens)
        except WindowTooSmall as exc:
            self._fail(str(exc))
        try:
            reply = self.deps.llm.complete(fitted.messages, specs)
        except LLMFatal as exc:
            self._fail(f"the model endpoint refused the request: {exc}")
        except LLMError as exc:
            self._llm_failure(str(exc))
        self.state.usage.calls += 1
        self.state.usage.prompt_tokens += reply.prompt_tokens
        self.state.usage.completion_tokens += reply.completion_tokens
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
        self.state.final_answer = answer
        self._end(Status.DONE, answer)
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


def render_thread(
    thread: Thread, comments: list[NewComment], detector: CommentDetectionManager
) -> str:
    """The opening task message. (Budgeting is the window's job; see bot/context.)"""
    kind = {"issue": "Issue", "pull": "Pull request", "merge_request": "Merge request"}[
        thread.key.kind.value
    ]
    labels = ", ".join(sorted(thread.labels)) or "none"
    parts = [
        f"# {kind} {thread.key}: {thread.title}",
        f"State: {thread.state}. Author: @{thread.author}. Labels: {labels}.",
        "",
        thread.body.strip() or "(no description)",
    ]
    if comments:
        parts += ["", "## Comments so far", detector.format_comment_message(comments)]
    return "\n".join(parts)
