"""The safe point: where a running task listens to its thread before it acts again.

One check reads the thread (state and labels) and the comments changed since the cursor, then:

- the daemon is stopping                -> halt (interrupted; resumes from disk)
- the thread is gone (404/410)          -> halt (stopped, reason `deleted`)
- the thread is closed or merged        -> halt (stopped, reason `closed`)
- a stop or pause from the controls     -> halt (stopped / paused)
- a cap reached (bot/task/allowance.py) -> halt (paused, one comment that asks)
- a resume while paused                 -> running again (after a cap: a new allowance)
- human talk, when `deliver` is set     -> appended to the conversation, then marked seen

Commands are consumed at every check; talk is delivered only at full checks (between a tool
call and the next one the results of one reply must stay together). Talk that is not delivered
stays undelivered: the comment detector's cursor never moves past it (docs/comment-protocol.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.core.clock import SYSTEM_CLOCK, Clock, parse_time
from bot.core.config import LabelSettings, LLMSettings
from bot.core.log import get_logger
from bot.core.metrics import Metrics
from bot.forge.base import Forge
from bot.forge.errors import ForgeError, NotFound
from bot.model.grant import PLAIN, Grant
from bot.model.state import Cap, Status
from bot.model.thread import TaskKey, Thread
from bot.model.trust import NewComment
from bot.store.base import ConversationLog
from bot.task.allowance import reached, renew
from bot.task.cap_note import cap_note, refused_note, resumed_note
from bot.task.comments import CommentDetectionManager, comment_ref
from bot.task.controls import UNPAUSE, Command, Control, Split, split_commands
from bot.task.handover import Running, Verdict, may_run
from bot.task.lifecycle import Lifecycle
from bot.task.outcome import Outcome

log = get_logger(__name__)
CLOSED_STATES = frozenset({"closed", "merged"})
# While a tool call waits on something outside (an MCP server), the thread's controls are read
# this often: a pause or stop cancels the call within about this long (README, "MCP tools").
WATCH_SECONDS = 0.5


@dataclass(frozen=True)
class Check:
    halt: Outcome | None = None  # the task must stop working now
    delivered: bool = False  # new talk was added to the conversation


def is_gone(exc: ForgeError) -> bool:
    """A deleted thread: 404, or GitHub's 410 Gone for an issue deleted from the repository."""
    return isinstance(exc, NotFound) or exc.status == 410


class LabelTrust(Protocol):
    """Whose labels count (bot/task/gate.py `Gate`): given at construction, never assumed."""

    def trusted(self, labels: frozenset[str]) -> frozenset[str]:
        """The thread's labels as trusted people left them."""
        ...

    def labelled_at(self, name: str) -> datetime | None:
        """When a label was last added, from the forge's events."""
        ...


class SafePoint:
    def __init__(
        self,
        forge: Forge,
        key: TaskKey,
        detector: CommentDetectionManager,
        conversation: ConversationLog,
        lifecycle: Lifecycle,
        labels: LabelSettings,
        stop: threading.Event,
        metrics: Metrics,
        label_trust: LabelTrust,
        llm: LLMSettings,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.forge = forge
        self.key = key
        self.detector = detector
        self.conversation = conversation
        self.lifecycle = lifecycle
        self.label_settings = labels
        self.stop = stop
        self.metrics = metrics
        self.clock = clock  # how long a comment waited for delivery
        self.thread: Thread | None = None  # as last read
        self.label_trust = label_trust
        self.llm = llm  # the caps and the price
        self.step: Callable[[], int] = lambda: lifecycle.state.step
        self.halted: Outcome | None = None  # what `watch` stopped a call for
        self._next_watch = 0.0

    def read_thread(self) -> Check:
        """The thread as it is now; a halt if it was deleted or closed."""
        try:
            thread = self.forge.get_thread(self.key)
        except ForgeError as exc:
            if is_gone(exc):
                return Check(halt=self.lifecycle.gone(exc.status))
            raise
        self.thread = thread
        self.lifecycle.labels = self.label_trust.trusted(thread.labels)
        facts = Running(
            self.lifecycle.state,
            self.lifecycle.labels,
            self.label_settings,
            open=thread.state not in CLOSED_STATES,
        )
        if may_run(facts).verdict is Verdict.CLOSED:  # else the commands are read next
            return Check(halt=self.lifecycle.closed())
        return Check()

    def check(self, deliver: bool = True) -> Check:
        if self.stop.is_set():
            self.lifecycle.save()
            return Check(halt=Outcome.INTERRUPTED)
        thread = self.read_thread()  # first: a deleted thread has no comments to list
        if thread.halt is not None:
            return thread
        fresh = self.detector.check_for_new_comments()
        split = split_commands(fresh, obeyed=self.detector.obeyed)
        self._record_commands(split.pure, split.obeyed, [str(c) for c in split.commands])
        talk = self._answer_asks(split)
        counted = self._answers(self._commands(split))
        state = self.lifecycle.state
        facts = Running(
            state,
            self.lifecycle.labels,
            self.label_settings,
            commands=[control.command for control in counted],
            spent=reached(state, self.llm),
        )
        decision = may_run(facts).verdict
        if decision is Verdict.STOP:
            return Check(halt=self.lifecycle.stop())
        if decision is Verdict.PAUSE:
            return Check(halt=self.lifecycle.pause())
        if decision is Verdict.CAPPED:
            assert facts.spent is not None
            return Check(halt=self.pause_at_cap(facts.spent))
        if decision is Verdict.RESUME:
            # The newest command decides (a pause after it would have won): its grant.
            self._resume(counted[-1].grant if counted else PLAIN)
        if not talk or not deliver:
            self.lifecycle.save()
            return Check()
        self._deliver(talk)
        return Check(delivered=True)

    def pause_at_cap(self, cap: Cap) -> Outcome:
        """Paused at `cap`, with the one comment that says what was spent and done."""
        state = self.lifecycle.state
        return self.lifecycle.pause_at_cap(cap, cap_note(state, self.llm, cap))

    def _resume(self, grant: Grant) -> None:
        """Running again; a task paused at a cap gets its allowance again (and the grant's
        more), counted from what it used: the label taken off grants it as `/bot resume`."""
        state = self.lifecycle.state
        if state.capped is None:
            self.lifecycle.resume()
            return
        renewal = renew(state, self.llm, grant)
        limit = renewal.allowance
        log.info(
            "allowance_renewed",
            cap=state.capped.value,
            grant=str(grant),
            steps=limit.steps,
            tokens=limit.tokens,
            cost=None if limit.cost is None else str(limit.cost),
            refused=renewal.refused,
        )
        self.lifecycle.resume(limit, resumed_note(renewal, self.llm))

    def _answers(self, counted: list[Control]) -> list[Control]:
        """On a task paused at a cap, only a resume (or `/bot`) written since the cap's
        comment answers it (same second: it does, the writer may have read it). One written
        before, while it ran or while that comment was still owed, was no answer to it: it is
        consumed as every command, and the comment asks (docs/architecture.md, invariant 16).
        """
        state = self.lifecycle.state
        if state.capped is None or state.status is not Status.PAUSED:
            return counted
        asked = parse_time(state.asked_at) if state.asked_at is not None else None
        kept = [
            c for c in counted if c.command not in UNPAUSE or (asked is not None and c.at >= asked)
        ]
        if len(kept) < len(counted):
            log.info(
                "resume_before_the_ask", cap=state.capped.value, ignored=len(counted) - len(kept)
            )
        return kept

    def _answer_asks(self, split: Split) -> list[NewComment]:
        """The talk to deliver. On a task paused at a cap, a writer's `/bot resume <word>`
        whose word grants nothing is answered, once, with what can be granted, and is taken
        out of the talk (seen): it was meant for the bot, not the model."""
        state = self.lifecycle.state
        if not split.asks or state.capped is None or state.status is not Status.PAUSED:
            return split.talk
        asked = [item for item, _ in split.asks]
        # Not under "comments": a restart takes those as seen, and a crash before the reply's
        # intent is saved would leave the question unanswered; this way it is answered then.
        self.conversation.append(
            {
                "role": "control",
                "kind": "control",
                "commands": [],
                "refused": [comment_ref(c.comment) for c in asked],
            }
        )
        self.detector.mark_seen(asked)
        self.lifecycle.answer("refused-grant", refused_note([word for _, word in split.asks]))
        log.info("grant_refused", comments=[c.comment.id for c in asked])
        return [item for item in split.talk if all(item is not a for a in asked)]

    def watch(self) -> bool:
        """Asked over and over while a tool call runs: whether to cancel it now. The daemon
        stopping is seen at once, the thread's controls (pause, stop, closed) every
        WATCH_SECONDS; the check that finds one acts on it as any safe point does, and
        `halted` says what the turn ends with. A lost lease raises from the check's save."""
        if self.stop.is_set():
            self.halted = Outcome.INTERRUPTED
            return True
        now = self.clock.monotonic()
        if now < self._next_watch:
            return False
        self._next_watch = now + WATCH_SECONDS
        check = self.check(deliver=False)
        self.halted = check.halt
        return check.halt is not None

    def _commands(self, split: Split) -> list[Control]:
        """The commands that count against the labels: a person's paused label added after a
        `/bot resume` or `/bot` is the newer control and is not cancelled by it (same second:
        the pause wins, the side without side effects). The bot's own paused label on a paused
        task is older than any command it has not read yet: no lookup."""
        paused = self.label_settings.paused
        state = self.lifecycle.state
        own = state.status is Status.PAUSED and state.labels_applied == Status.PAUSED.value
        unpause = {Command.RESUME, Command.START} & set(split.commands)
        if paused not in self.lifecycle.labels or own or not unpause:
            return split.counted()
        return split.counted(self.label_trust.labelled_at(paused))

    def _record_commands(
        self, pure: list[NewComment], obeyed: list[NewComment], commands: list[str]
    ) -> None:
        """Consumed commands go on record before they count as seen (or obeyed)."""
        if not pure and not obeyed:
            return
        self.conversation.append(
            {
                "role": "control",
                "kind": "control",
                "commands": commands,
                "comments": [comment_ref(c.comment) for c in pure],  # settled: nothing else
                "obeyed": [comment_ref(c.comment) for c in obeyed],  # its text still to deliver
            }
        )
        self.detector.mark_seen(pure)
        self.detector.mark_obeyed(obeyed)

    def _deliver(self, talk: list[NewComment]) -> None:
        self.detector.add_to_context(talk, step=self.step())
        self.lifecycle.save()
        now = self.clock.now()
        for item in talk:
            delay = (now - item.comment.updated_at).total_seconds()
            self.metrics.comment_delivery.observe(max(delay, 0.0))
        log.info("comments_delivered", count=len(talk), ids=[c.comment.id for c in talk])
