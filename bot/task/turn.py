"""One turn of the model: the call (within the window and the caps), then its tool calls.

Every tool call passes a safe point before it runs (controls only: the results of one reply
stay together), also the pending calls of a turn cut short by a restart. A side-effecting
call journals its result in the task state before the result enters the conversation, so a
crash between the two answers the call from the journal instead of doing it twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.agent.history import SUMMARY_HEADER, compact, needs_compaction, usage_fields, visible
from bot.agent.shrink import StillTooLong, WindowCap, complete_or_shrink
from bot.agent.tools import Toolbox, ToolResult
from bot.context.tokens import TokenCounter
from bot.context.window import WindowTooSmall, fit
from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.config import LLMSettings
from bot.core.log import get_logger
from bot.core.metrics import Metrics
from bot.llm.base import LLMCancelled, LLMClient, LLMError, LLMFatal, LLMReply, Message, ToolCall
from bot.store.base import ConversationLog
from bot.task.allowance import reached
from bot.task.journal import run_call, settled
from bot.task.lifecycle import Lifecycle
from bot.task.outcome import Outcome
from bot.task.safepoint import SafePoint

log = get_logger(__name__)
MAX_MALFORMED = 3
MAX_LLM_FAILURES = 3
NUDGE = "Your reply was empty. Use a tool or call finish."


@dataclass(frozen=True)
class TurnEnd:
    final: str | None = None  # the model's final answer, when it gave one
    halt: Outcome | None = None  # the task stops here


class Turn:
    def __init__(
        self,
        llm: LLMClient,
        settings: LLMSettings,
        counter: TokenCounter,
        conversation: ConversationLog,
        lifecycle: Lifecycle,
        safe: SafePoint,
        toolbox: Callable[[], Toolbox],
        metrics: Metrics,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.llm = llm
        self.settings = settings
        self.counter = counter
        self.conversation = conversation
        self.lifecycle = lifecycle
        self.safe = safe
        self.toolbox = toolbox
        self.metrics = metrics
        self.clock = clock  # how long each model call and tool call took (the timeline's)
        self.window_cap = WindowCap()  # lowered when the endpoint refuses a request as too long

    def budget(self) -> int:
        """Tokens a request may use: the window minus the room kept for the answer."""
        budget = self.settings.context_window - self.settings.reserve_output_tokens
        return self.window_cap.limit(budget)

    # -- a new turn ---------------------------------------------------------------------------

    def take(self) -> TurnEnd:
        """Check the caps, call the model, run its tool calls."""
        cap = reached(self.lifecycle.state, self.settings)  # the allowance in the state
        if cap is not None:
            return TurnEnd(halt=self.safe.pause_at_cap(cap))  # it asks; nothing is thrown away
        reply = self._call_model()
        if isinstance(reply, Outcome):
            return TurnEnd(halt=reply)
        return self.apply(reply, done=set())

    def _call_model(self) -> LLMReply | Outcome:
        specs = self.toolbox().specs()
        tools_tokens = self.counter.tools([s.openai() for s in specs])
        try:
            # The window is a hard limit: whatever compaction left, `fit` enforces it.
            messages = self._messages(tools_tokens)
            summarized = len(messages) > 2 and str(messages[2].get("content")).startswith(
                SUMMARY_HEADER
            )
            pinned = 3 if summarized else 2
            fitted = fit(messages, self.budget(), self.counter, tools_tokens, pinned)
        except WindowTooSmall as exc:
            return self.lifecycle.fail(str(exc))
        started = self.clock.monotonic()
        try:
            # A "too long" refusal from the endpoint: shrink the request and retry, once.
            reply, fitted = complete_or_shrink(
                self.llm,
                fitted,
                specs,
                lambda limit: fit(messages, limit, self.counter, tools_tokens, pinned),
                self.window_cap,
            )
        except LLMCancelled:
            self.lifecycle.save()  # stopping: the turn is redone after the restart
            log.info("model_call_cancelled", step=self.lifecycle.state.step)
            return Outcome.INTERRUPTED
        except StillTooLong as exc:
            return self.lifecycle.fail(str(exc))
        except LLMFatal as exc:
            return self.lifecycle.fail(f"the model endpoint refused the request: {exc}")
        except LLMError as exc:
            return self._llm_failure(str(exc))
        self._record(reply, self.clock.monotonic() - started)
        log.info(
            "model_replied",
            step=self.lifecycle.state.step,
            tool_calls=[c.name for c in reply.tool_calls],
            prompt_tokens=reply.prompt_tokens,
            fitted_tokens=fitted.tokens,
            omitted_turns=fitted.omitted_turns,
        )
        return reply

    def _record(self, reply: LLMReply, duration: float) -> None:
        state = self.lifecycle.state
        state.usage.calls += 1
        state.usage.prompt_tokens += reply.prompt_tokens
        state.usage.completion_tokens += reply.completion_tokens
        self._count(reply.prompt_tokens, reply.completion_tokens)
        state.step += 1
        state.llm_failures = 0
        state.forge_failures = 0  # progress: earlier forge errors were passing
        self.conversation.append(
            {
                **reply.message(),
                "kind": "reply",
                "step": state.step,
                **usage_fields(reply),
                "duration": round(duration, 3),
            }
        )
        self.lifecycle.save()

    def _count(self, prompt_tokens: int, completion_tokens: int) -> None:
        """A model call's tokens, and their cost at `llm.price`, on the metrics."""
        self.metrics.llm_tokens.labels("prompt").inc(prompt_tokens)
        self.metrics.llm_tokens.labels("completion").inc(completion_tokens)
        price = self.settings.price
        if price is not None:
            cost = price.cost(prompt_tokens, completion_tokens)
            self.metrics.llm_cost.labels(price.currency).inc(float(cost))

    def _messages(self, tools_tokens: int) -> list[Message]:
        limit = self.budget() - tools_tokens
        entries = self.conversation.entries()
        messages = [m for _, m in visible(entries)]
        if not needs_compaction(messages, limit, self.counter):
            return messages
        started = self.clock.monotonic()
        try:
            summary = compact(entries, limit, self.counter, self.llm)
        except LLMError as exc:
            log.warning("history_compaction_failed", error=str(exc))
            return messages
        if summary is None:
            return messages
        summary["duration"] = round(self.clock.monotonic() - started, 3)
        self.conversation.append(summary)
        used = summary.pop("usage")
        usage = self.lifecycle.state.usage
        usage.prompt_tokens += used["prompt_tokens"]
        usage.completion_tokens += used["completion_tokens"]
        self._count(used["prompt_tokens"], used["completion_tokens"])
        self.lifecycle.save()
        return [m for _, m in visible(self.conversation.entries())]

    def _llm_failure(self, error: str) -> Outcome:
        state = self.lifecycle.state
        state.llm_failures += 1
        if state.llm_failures >= MAX_LLM_FAILURES:
            return self.lifecycle.fail(f"the model could not be reached ({error})")
        self.lifecycle.save()
        self.lifecycle.events.error("model", error)
        log.warning("model_unavailable", error=error, failures=state.llm_failures)
        return Outcome.INTERRUPTED

    # -- a turn cut short ---------------------------------------------------------------------

    def resume(self) -> TurnEnd:
        """After a restart, finish the turn the previous process was in the middle of.

        The last reply's tool calls without a result run now, each after its safe point
        (posts carry markers, results are journaled), so no step is lost or repeated and the
        conversation stays valid.
        """
        entries = self.conversation.entries()
        last = max((i for i, e in enumerate(entries) if e.get("role") == "assistant"), default=None)
        if last is None:
            return TurnEnd()
        after = entries[last + 1 :]
        if any(e.get("role") == "user" for e in after):
            return TurnEnd()  # new input arrived after that reply: the model speaks next
        entry = entries[last]
        calls = tuple(
            ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments") or "")
            for c in entry.get("tool_calls") or []
        )
        done = {str(e.get("tool_call_id")) for e in after if e.get("role") == "tool"}
        for call_id in done:
            settled(self.lifecycle.state, call_id)
        if calls and done >= {c.id for c in calls}:
            return TurnEnd(final=self._finish_argument(calls))
        return self.apply(LLMReply(entry.get("content"), calls), done=done)

    # -- tool calls ---------------------------------------------------------------------------

    def apply(self, reply: LLMReply, done: set[str]) -> TurnEnd:
        """Run the reply's tool calls (those not `done` already)."""
        if not reply.tool_calls:
            if reply.content and reply.content.strip():
                return TurnEnd(final=reply.content.strip())  # a plain answer is final
            halt = self._malformed("empty reply")
            if halt is None:
                self.conversation.append({"role": "user", "content": NUDGE, "kind": "nudge"})
                self.lifecycle.save()
            return TurnEnd(halt=halt)
        final = self._finish_argument(tuple(c for c in reply.tool_calls if c.id in done))
        malformed = 0
        pending = [c for c in reply.tool_calls if c.id not in done]
        for call in pending:
            check = self.safe.check(deliver=False)  # controls before every side effect
            if check.halt is not None:
                return TurnEnd(halt=check.halt)
            result = self._run(call)
            if result.interrupted:  # cancelled by a pause, stop or SIGTERM while it ran
                return TurnEnd(halt=self.safe.halted or Outcome.INTERRUPTED)
            malformed += int(result.malformed)
            final = result.finish or final
        if pending and malformed == len(pending):
            return TurnEnd(final=final, halt=self._malformed("every tool call was malformed"))
        self.lifecycle.state.malformed_streak = 0
        self.lifecycle.save()
        return TurnEnd(final=final)

    def _run(self, call: ToolCall) -> ToolResult:
        state = self.lifecycle.state
        # Answered from an earlier process's records (a result, or a start without one).
        earlier = bool(state.tool_journal.get(call.id)) or call.id in state.tool_started
        started = self.clock.monotonic()
        result = run_call(state, self.lifecycle.save, self.toolbox(), call)
        if result.interrupted:
            return result
        entry: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": call.id,
            "content": result.content,
            "kind": "tool",
            "name": call.name,
            "ok": result.ok and not result.malformed,
            "duration": round(self.clock.monotonic() - started, 3),
        }
        if result.outcome is not None:
            entry["outcome"] = result.outcome
        if earlier:
            entry["journaled"] = True  # carried out by an earlier process: its time is unknown
            entry.pop("duration")
        self.conversation.append(entry)
        settled(state, call.id)
        self.lifecycle.save()
        return result

    def _finish_argument(self, calls: tuple[ToolCall, ...]) -> str | None:
        for call in calls:
            if call.name == "finish":
                return self.toolbox().execute(call).finish
        return None

    def _malformed(self, what: str) -> Outcome | None:
        state = self.lifecycle.state
        state.malformed_streak += 1
        self.lifecycle.save()
        log.warning("model_output_malformed", what=what, streak=state.malformed_streak)
        if state.malformed_streak >= MAX_MALFORMED:
            return self.lifecycle.fail(
                f"the model gave {MAX_MALFORMED} malformed replies in a row ({what})"
            )
        return None
