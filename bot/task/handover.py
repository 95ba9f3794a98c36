"""May this thread start or continue? One rule, asked at the three moments that decide it,
each with the facts it knows (the I/O that gathers them stays with the caller):

- `Planning` (bot/service/dispatch.py): discovery found the thread; its labels are as found,
  and who applied them is checked when the task starts;
- `Starting` (bot/task/runner.py): a job taken under the task's lease, before anything is
  done; whether the start signals come from a trusted person is known (bot/task/gate.py);
- `Running` (bot/task/safepoint.py): a safe point of a run; the labels as trusted people left
  them, the trusted commands since the last check, the cap the run reached (if any).

A fact that costs a request is None until read: the rule then answers `ASK`, naming the fact
(`need`), and the caller reads it and asks again. So a decision costs the requests it always
did: no comment list for a finished thread the trigger label hands back, no thread read for a
job that resumes a running task.

Every row of the rule is in one table: tests/task/test_handover.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from bot.core.config import LabelSettings
from bot.model.state import Cap, Status, TaskState
from bot.model.thread import ControlEvent
from bot.task.controls import Command

# What hands a finished task back, in a comment from a writer.
HAND_BACK = frozenset({Command.START, Command.RESUME})


class Verdict(StrEnum):
    START = "start"  # the first run (no state yet, or its first run never began)
    NEW_RUN = "new run"  # a finished task handed back: a new run, continuing the last one's work
    CONTINUE = "continue"  # the saved run goes on (its safe point reads the controls again)
    RESUME = "resume"  # a paused run goes on: the pause was lifted
    SETTLE = "settle"  # a finished task: only its owed closing comment or labels
    PAUSE = "pause"
    CAPPED = "capped"  # a cap is reached: pause and ask (docs/architecture.md, invariant 16)
    STOP = "stop"
    CLOSED = "closed"  # the thread was closed or merged: the run ends (stopped, `closed`)
    IGNORE = "ignore"  # asked for only by people who may not control the bot
    NOTHING = "nothing"
    ASK = "ask"  # a fact not read yet is needed (`Decision.need`)


class Need(StrEnum):
    COMMANDS = "commands"  # the trusted commands (since the task finished, or the last check)
    SIGNALS = "signals"  # who gave the start signals on the thread (`StartSignals`)


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    need: Need | None = None  # ASK: the fact to read before asking again


@dataclass(frozen=True)
class StartSignals:
    """Who gave the thread's start signals (the trigger label, the processing label, the bot's
    assignment), read from the forge's record in that order up to the first one a trusted
    person gave (bot/task/gate.py)."""

    given: bool  # the thread carries at least one
    vouched: tuple[str, str] | None = None  # the first from a trusted person: (kind, name)
    ignored: tuple[ControlEvent, ...] = ()  # those read before it, from others (to undo)


@dataclass(frozen=True)
class Planning:
    state: TaskState | None
    labels: frozenset[str]  # as discovery found them
    settings: LabelSettings
    assigned: bool = False  # the bot is among the assignees
    called: bool = False  # a writer mentioned the bot or wrote `/bot`
    backing_off: bool = False  # retried after forge errors, not before `retry_at`
    commands: Sequence[Command] | None = None  # a finished task's, trusted, since it finished


@dataclass(frozen=True)
class Starting:
    state: TaskState | None
    settings: LabelSettings
    fresh: bool  # the job asks for a new run: a start, or a finished task handed back
    labels: frozenset[str] = frozenset()  # the thread's, read with `signals`
    signals: StartSignals | None = None
    commands: Sequence[Command] | None = None  # trusted, since the task finished


@dataclass(frozen=True)
class Running:
    state: TaskState
    labels: frozenset[str]  # as trusted people left them (`Gate.filter`)
    settings: LabelSettings
    open: bool = True
    # Trusted, since the last check; those older than a person's paused label do not count,
    # nor, on a task paused at a cap, a resume older than the cap's comment.
    commands: Sequence[Command] | None = None
    spent: Cap | None = None  # the cap the run has reached (bot/task/allowance.py `reached`)


def may_run(facts: Planning | Starting | Running) -> Decision:
    """What the thread may do now, and why. The three moments share the rules of a finished
    task (`_finished`, `_owed`); each row of the table names its moment."""
    if isinstance(facts, Planning):
        return _planning(facts)
    if isinstance(facts, Starting):
        return _starting(facts)
    return _running(facts)


def _planning(facts: Planning) -> Decision:
    state = facts.state
    if state is not None and facts.backing_off:
        return Decision(Verdict.NOTHING, "backing off after forge errors")
    if state is None:
        return _first(facts)
    if not state.status.terminal:
        return Decision(Verdict.CONTINUE, "a saved run: resumed, its controls read again")
    return _finished(state, facts.settings.trigger in facts.labels, facts.commands)


def _first(facts: Planning) -> Decision:
    """No state: any start signal starts (its giver is checked when the task starts)."""
    if facts.settings.trigger in facts.labels:
        return Decision(Verdict.START, "the trigger label")
    if facts.settings.processing in facts.labels:
        return Decision(Verdict.START, "the processing label without state: start over")
    if facts.assigned:
        return Decision(Verdict.START, "the bot is assigned")
    if facts.called:
        return Decision(Verdict.START, "a writer called the bot")
    return Decision(Verdict.NOTHING, "no start signal")


def _starting(facts: Starting) -> Decision:
    """Under the lease the plan is asked again: it may have been made before the task
    finished (by another daemon, from the thread as it was then). A start signal counts only
    from a trusted person, and a thread whose signals all come from others is ignored; one
    with none was planned from a writer's comment, trust-checked with the comment. A finished
    task is handed back by the trigger label only if a trusted person added it: an assignment
    stays on after the run it started and vouches for no later label."""
    state = facts.state
    terminal = state is not None and state.status.terminal
    if state is None or not state.initialized or (facts.fresh and terminal):
        if facts.signals is None:
            return Decision(Verdict.ASK, "who gave the start signals", Need.SIGNALS)
        if facts.signals.given and facts.signals.vouched is None:
            return Decision(Verdict.IGNORE, "a start signal from someone who may not control me")
    if state is None or not (state.initialized or terminal):
        return Decision(Verdict.START, "the first run")
    if not terminal:
        return Decision(Verdict.CONTINUE, "a saved run")
    if not facts.fresh:
        return _owed(state)
    trigger = facts.settings.trigger
    signals = facts.signals or StartSignals(given=False)
    decision = _finished(state, signals.vouched == ("labeled", trigger), facts.commands)
    if decision.verdict in (Verdict.SETTLE, Verdict.NOTHING) and trigger in facts.labels:
        return Decision(Verdict.IGNORE, "the trigger label from someone who may not control me")
    return decision


def _finished(state: TaskState, trigger: bool, commands: Sequence[Command] | None) -> Decision:
    """A finished task, handed back by the trigger label (`trigger`) or a writer's command."""
    if trigger:
        return Decision(Verdict.NEW_RUN, "the trigger label again")
    if commands is None:
        return Decision(Verdict.ASK, "any `/bot` since it finished", Need.COMMANDS)
    if HAND_BACK & set(commands):
        return Decision(Verdict.NEW_RUN, "`/bot` or `/bot resume` since it finished")
    return _owed(state)


def _owed(state: TaskState) -> Decision:
    if state.pending_post is not None or state.labels_applied != state.status:
        return Decision(Verdict.SETTLE, "its closing comment or labels are owed")
    return Decision(Verdict.NOTHING, "finished, nothing owed")


def _running(facts: Running) -> Decision:
    """A paused task carries the paused label (the bot keeps it so), hence the label alone
    says whether to pause: added by a person it pauses, removed it resumes. The stopped label
    always stops. Then the commands, oldest first: the newest pause or `/bot` wins, and a
    `/bot stop` among them stops. A running task that reached a cap pauses and asks, also
    when a pause comes at the same check; only a resume written since the cap's comment renews
    its allowance (the safe point keeps the others out of `commands`), so a `/bot resume`
    written while it ran does not. A task paused at a cap whose label the bot has not put on
    yet (it stopped between the two) stays paused: no label was taken off."""
    if not facts.open:
        return Decision(Verdict.CLOSED, "the thread is closed or merged")
    if facts.commands is None:
        return Decision(Verdict.ASK, "the commands since the last check", Need.COMMANDS)
    settings = facts.settings
    if settings.stopped in facts.labels:
        return Decision(Verdict.STOP, "the stopped label")
    paused = "the paused label" if settings.paused in facts.labels else None
    for command in facts.commands:
        if command is Command.STOP:
            return Decision(Verdict.STOP, "`/bot stop`")
        paused = "`/bot pause`" if command is Command.PAUSE else None
    state = facts.state
    if paused is not None and facts.spent is not None and state.status is Status.RUNNING:
        # One pause, one comment: the cap's, which says what the pause alone would not.
        return Decision(Verdict.CAPPED, f"{paused}, and the {facts.spent.value} allowance is spent")
    if paused is not None:
        return Decision(Verdict.PAUSE, paused)
    if state.status is Status.PAUSED:
        unlabelled = state.capped is not None and state.labels_applied != Status.PAUSED
        if unlabelled and not facts.commands:
            return Decision(Verdict.PAUSE, "paused at a cap, its label still owed")
        return Decision(Verdict.RESUME, "the pause was lifted")
    if facts.spent is not None:
        return Decision(Verdict.CAPPED, f"the {facts.spent.value} allowance is spent")
    return Decision(Verdict.CONTINUE, "nothing asks to stop or pause")
