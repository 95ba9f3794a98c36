"""Every row of "may this thread start or continue" (bot/task/handover.py), one table.

A row is the facts one moment knows and the decision it must get: planning (discovery, the
dispatcher), starting (a job taken under the lease, the runner) and running (a safe point).
`None` for a fact is "not read yet": a row that decides without it shows the request it saves.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from bot.core.config import LabelSettings
from bot.model.state import Cap, PendingPost, Status, TaskState
from bot.model.thread import ControlEvent
from bot.task.controls import Command
from bot.task.handover import (
    Decision,
    Need,
    Planning,
    Running,
    Starting,
    StartSignals,
    Verdict,
    may_run,
)

S = LabelSettings()
TRIGGER, PROCESSING, PAUSED, STOPPED = S.trigger, S.processing, S.paused, S.stopped
START, PAUSE, RESUME, STOP = Command.START, Command.PAUSE, Command.RESUME, Command.STOP


def state(
    status: Status, initialized: bool = True, post: bool = False, applied: bool = True
) -> TaskState:
    """A saved task; `applied`: its labels match its status; `post`: a comment is owed."""
    saved = TaskState(key="github:acme/app#1", status=status, initialized=initialized)
    saved.labels_applied = status if applied else None
    if post:
        saved.pending_post = PendingPost(seq=3, purpose=status.value, body="Done.")
    return saved


def labels(*names: str) -> frozenset[str]:
    return frozenset(names)


def plan(
    saved: TaskState | None,
    *names: str,
    assigned: bool = False,
    called: bool = False,
    backing_off: bool = False,
    commands: list[Command] | None = None,
) -> Planning:
    return Planning(saved, labels(*names), S, assigned, called, backing_off, commands)


def start(
    saved: TaskState | None,
    fresh: bool,
    *names: str,
    signals: StartSignals | None = None,
    commands: list[Command] | None = None,
) -> Starting:
    return Starting(saved, S, fresh, labels(*names), signals, commands)


def run(
    saved: TaskState,
    *names: str,
    open: bool = True,
    commands: list[Command] | None = None,
    spent: Cap | None = None,
) -> Running:
    return Running(saved, labels(*names), S, open, commands, spent)


def capped(cap: Cap = Cap.STEPS, applied: bool = True) -> TaskState:
    """Paused at a cap; `applied`: the paused label is on (the bot put it there)."""
    saved = state(Status.PAUSED, applied=applied)
    saved.capped = cap
    return saved


def event(name: str, actor: str = "tracy") -> ControlEvent:
    return ControlEvent("labeled", name, actor, datetime(2026, 1, 1, tzinfo=UTC), "e1")


NONE = StartSignals(given=False)  # the thread carries no start signal
BY_WRITER = StartSignals(True, ("labeled", TRIGGER))
ASSIGNED_BY_WRITER = StartSignals(True, ("assigned", "coding-bot"))
BY_OTHERS = StartSignals(True, None, (event(TRIGGER),))
# The trigger label from a triage user, read first; the bot's assignment from a writer.
MIXED = StartSignals(True, ("assigned", "coding-bot"), (event(TRIGGER),))
UNKNOWN_TRIGGER = StartSignals(True, ("assigned", "coding-bot"))  # no record of the label

RUNNING, PAUSED_, DONE = state(Status.RUNNING), state(Status.PAUSED), state(Status.DONE)
NEVER_BEGAN = state(Status.RUNNING, initialized=False)
CLOSED_EARLY = state(Status.STOPPED, initialized=False, applied=False)  # closed before it began


@dataclass(frozen=True)
class Row:
    name: str
    facts: Planning | Starting | Running
    verdict: Verdict
    reason: str
    need: Need | None = None


ASK_COMMANDS_FINISHED = "any `/bot` since it finished"
OWED = "its closing comment or labels are owed"
NOTHING_OWED = "finished, nothing owed"
HANDED = "`/bot` or `/bot resume` since it finished"

TABLE = [
    # -- planning: bot/service/dispatch.py, from what discovery found ----------------------
    Row("plan: no state, trigger", plan(None, TRIGGER), Verdict.START, "the trigger label"),
    Row(
        "plan: no state, processing",
        plan(None, PROCESSING),
        Verdict.START,
        "the processing label without state: start over",
    ),
    Row(
        "plan: no state, assigned", plan(None, assigned=True), Verdict.START, "the bot is assigned"
    ),
    Row(
        "plan: no state, writer's mention",
        plan(None, called=True),
        Verdict.START,
        "a writer called the bot",
    ),
    Row("plan: no state, no signal", plan(None, "bug"), Verdict.NOTHING, "no start signal"),
    Row("plan: no state, paused label", plan(None, PAUSED), Verdict.NOTHING, "no start signal"),
    Row(
        "plan: running",
        plan(RUNNING),
        Verdict.CONTINUE,
        "a saved run: resumed, its controls read again",
    ),
    Row(
        "plan: paused, label still on",
        plan(PAUSED_, PAUSED),
        Verdict.CONTINUE,
        "a saved run: resumed, its controls read again",
    ),
    Row(
        "plan: saved run not found (labels unknown)",
        plan(PAUSED_),
        Verdict.CONTINUE,
        "a saved run: resumed, its controls read again",
    ),
    Row(
        "plan: running, first run never began",
        plan(NEVER_BEGAN),
        Verdict.CONTINUE,
        "a saved run: resumed, its controls read again",
    ),
    Row(
        "plan: running, backing off",
        plan(RUNNING, backing_off=True),
        Verdict.NOTHING,
        "backing off after forge errors",
    ),
    Row(
        "plan: done, trigger, backing off",
        plan(DONE, TRIGGER, backing_off=True),
        Verdict.NOTHING,
        "backing off after forge errors",
    ),
    Row(
        "plan: done, trigger (comments not read)",
        plan(DONE, TRIGGER),
        Verdict.NEW_RUN,
        "the trigger label again",
    ),
    Row(
        "plan: failed, trigger",
        plan(state(Status.FAILED), TRIGGER),
        Verdict.NEW_RUN,
        "the trigger label again",
    ),
    Row(
        "plan: stopped, trigger",
        plan(state(Status.STOPPED), TRIGGER),
        Verdict.NEW_RUN,
        "the trigger label again",
    ),
    Row(
        "plan: done, no trigger: read the comments",
        plan(DONE, "coding agent done"),
        Verdict.ASK,
        ASK_COMMANDS_FINISHED,
        Need.COMMANDS,
    ),
    Row("plan: done, /bot", plan(DONE, commands=[START]), Verdict.NEW_RUN, HANDED),
    Row("plan: done, /bot resume", plan(DONE, commands=[RESUME]), Verdict.NEW_RUN, HANDED),
    Row("plan: done, /bot pause", plan(DONE, commands=[PAUSE]), Verdict.NOTHING, NOTHING_OWED),
    Row("plan: done, /bot stop", plan(DONE, commands=[STOP]), Verdict.NOTHING, NOTHING_OWED),
    # Any `/bot` hands back, whatever came after it (a safe point lets the newest win).
    Row(
        "plan: done, /bot then /bot stop",
        plan(DONE, commands=[START, STOP]),
        Verdict.NEW_RUN,
        HANDED,
    ),
    Row(
        "plan: done, closing comment owed",
        plan(state(Status.DONE, post=True), commands=[]),
        Verdict.SETTLE,
        OWED,
    ),
    Row(
        "plan: done, labels owed",
        plan(state(Status.DONE, applied=False), commands=[]),
        Verdict.SETTLE,
        OWED,
    ),
    Row("plan: done, nothing owed", plan(DONE, commands=[]), Verdict.NOTHING, NOTHING_OWED),
    Row(
        "plan: done, still assigned",
        plan(DONE, assigned=True, commands=[]),
        Verdict.NOTHING,
        NOTHING_OWED,
    ),
    Row(
        "plan: done, processing label",
        plan(DONE, PROCESSING, commands=[]),
        Verdict.NOTHING,
        NOTHING_OWED,
    ),
    Row(
        "plan: done, writer's mention",
        plan(DONE, called=True, commands=[]),
        Verdict.NOTHING,
        NOTHING_OWED,
    ),
    # -- starting: bot/task/runner.py (and Gate.start_allowed), under the lease --------------
    Row(
        "start: no state: who gave the signals?",
        start(None, True),
        Verdict.ASK,
        "who gave the start signals",
        Need.SIGNALS,
    ),
    Row(
        "start: no state, trigger from a writer",
        start(None, True, TRIGGER, signals=BY_WRITER),
        Verdict.START,
        "the first run",
    ),
    Row(
        "start: no state, signals only from others",
        start(None, True, TRIGGER, signals=BY_OTHERS),
        Verdict.IGNORE,
        "a start signal from someone who may not control me",
    ),
    Row(
        "start: no state, no signal (a writer's comment planned it)",
        start(None, True, signals=NONE),
        Verdict.START,
        "the first run",
    ),
    Row(
        "start: no state, trigger from others, assigned by a writer",
        start(None, True, TRIGGER, signals=MIXED),
        Verdict.START,
        "the first run",
    ),
    Row(
        "start: first run never began, resumed: who gave the signals?",
        start(NEVER_BEGAN, False),
        Verdict.ASK,
        "who gave the start signals",
        Need.SIGNALS,
    ),
    Row(
        "start: first run never began, signals from others",
        start(NEVER_BEGAN, False, TRIGGER, signals=BY_OTHERS),
        Verdict.IGNORE,
        "a start signal from someone who may not control me",
    ),
    Row(
        "start: first run never began, no signal",
        start(NEVER_BEGAN, False, signals=NONE),
        Verdict.START,
        "the first run",
    ),
    Row("start: running (thread not read)", start(RUNNING, False), Verdict.CONTINUE, "a saved run"),
    Row("start: paused, fresh job", start(PAUSED_, True), Verdict.CONTINUE, "a saved run"),
    Row(
        "start: done, resume job, owed (thread not read)",
        start(state(Status.DONE, applied=False), False),
        Verdict.SETTLE,
        OWED,
    ),
    Row(
        "start: done, resume job, nothing owed (stale)",
        start(DONE, False),
        Verdict.NOTHING,
        NOTHING_OWED,
    ),
    Row(
        "start: done, new run: who gave the signals?",
        start(DONE, True),
        Verdict.ASK,
        "who gave the start signals",
        Need.SIGNALS,
    ),
    Row(
        "start: done, trigger from a writer",
        start(DONE, True, TRIGGER, signals=BY_WRITER),
        Verdict.NEW_RUN,
        "the trigger label again",
    ),
    Row(
        "start: done, no signal: read the comments",
        start(DONE, True, signals=NONE),
        Verdict.ASK,
        ASK_COMMANDS_FINISHED,
        Need.COMMANDS,
    ),
    Row(
        "start: done, /bot from a writer",
        start(DONE, True, signals=NONE, commands=[START]),
        Verdict.NEW_RUN,
        HANDED,
    ),
    Row(
        "start: done, no longer handed back (planned before it finished)",
        start(DONE, True, signals=NONE, commands=[]),
        Verdict.NOTHING,
        NOTHING_OWED,
    ),
    Row(
        "start: done, no longer handed back, owed",
        start(state(Status.DONE, post=True), True, signals=NONE, commands=[]),
        Verdict.SETTLE,
        OWED,
    ),
    Row(
        "start: done, trigger only from others",
        start(DONE, True, TRIGGER, signals=BY_OTHERS),
        Verdict.IGNORE,
        "a start signal from someone who may not control me",
    ),
    Row(
        "start: done, assigned by a writer, /bot",
        start(DONE, True, signals=ASSIGNED_BY_WRITER, commands=[START]),
        Verdict.NEW_RUN,
        HANDED,
    ),
    # Fixed here: the writer's standing assignment vouched for a triage user's trigger label.
    Row(
        "start: done, trigger from others, assigned by a writer: read the comments",
        start(DONE, True, TRIGGER, signals=MIXED),
        Verdict.ASK,
        ASK_COMMANDS_FINISHED,
        Need.COMMANDS,
    ),
    Row(
        "start: done, trigger from others, assigned by a writer, no /bot",
        start(DONE, True, TRIGGER, signals=MIXED, commands=[]),
        Verdict.IGNORE,
        "the trigger label from someone who may not control me",
    ),
    Row(
        "start: done, trigger from others, assigned by a writer, /bot from a writer",
        start(DONE, True, TRIGGER, signals=MIXED, commands=[START]),
        Verdict.NEW_RUN,
        HANDED,
    ),
    Row(
        "start: done, trigger of no record, assigned by a writer, no /bot",
        start(DONE, True, TRIGGER, signals=UNKNOWN_TRIGGER, commands=[]),
        Verdict.IGNORE,
        "the trigger label from someone who may not control me",
    ),
    Row(
        "start: closed before it began, resume job: who gave the signals?",
        start(CLOSED_EARLY, False),
        Verdict.ASK,
        "who gave the start signals",
        Need.SIGNALS,
    ),
    Row(
        "start: closed before it began, no signal, labels owed",
        start(CLOSED_EARLY, False, signals=NONE),
        Verdict.SETTLE,
        OWED,
    ),
    # -- running: bot/task/safepoint.py, labels as trusted people left them ------------------
    Row(
        "run: closed (before the comments are read)",
        run(RUNNING, STOPPED, open=False),
        Verdict.CLOSED,
        "the thread is closed or merged",
    ),
    Row(
        "run: paused task closed",
        run(PAUSED_, PAUSED, open=False),
        Verdict.CLOSED,
        "the thread is closed or merged",
    ),
    Row(
        "run: open: read the commands",
        run(RUNNING),
        Verdict.ASK,
        "the commands since the last check",
        Need.COMMANDS,
    ),
    Row(
        "run: nothing asked",
        run(RUNNING, "bug", commands=[]),
        Verdict.CONTINUE,
        "nothing asks to stop or pause",
    ),
    Row(
        "run: stopped label", run(RUNNING, STOPPED, commands=[]), Verdict.STOP, "the stopped label"
    ),
    Row(
        "run: stopped label beats /bot resume",
        run(PAUSED_, STOPPED, PAUSED, commands=[RESUME]),
        Verdict.STOP,
        "the stopped label",
    ),
    Row("run: /bot stop", run(RUNNING, commands=[STOP]), Verdict.STOP, "`/bot stop`"),
    # Any `/bot stop` in one check stops, even before a newer `/bot resume`.
    Row(
        "run: /bot stop, /bot resume",
        run(RUNNING, commands=[STOP, RESUME]),
        Verdict.STOP,
        "`/bot stop`",
    ),
    Row(
        "run: paused label stops nothing, /bot stop does",
        run(RUNNING, PAUSED, commands=[STOP]),
        Verdict.STOP,
        "`/bot stop`",
    ),
    Row("run: paused label", run(RUNNING, PAUSED, commands=[]), Verdict.PAUSE, "the paused label"),
    Row("run: /bot pause", run(RUNNING, commands=[PAUSE]), Verdict.PAUSE, "`/bot pause`"),
    Row(
        "run: /bot, then /bot pause",
        run(RUNNING, commands=[START, PAUSE]),
        Verdict.PAUSE,
        "`/bot pause`",
    ),
    Row(
        "run: /bot pause, then /bot",
        run(RUNNING, commands=[PAUSE, START]),
        Verdict.CONTINUE,
        "nothing asks to stop or pause",
    ),
    Row(
        "run: paused label, newer /bot resume",
        run(RUNNING, PAUSED, commands=[RESUME]),
        Verdict.CONTINUE,
        "nothing asks to stop or pause",
    ),
    Row(
        "run: paused, its label on",
        run(PAUSED_, PAUSED, commands=[]),
        Verdict.PAUSE,
        "the paused label",
    ),
    Row(
        "run: paused, label removed",
        run(PAUSED_, commands=[]),
        Verdict.RESUME,
        "the pause was lifted",
    ),
    Row(
        "run: paused, /bot resume under its label",
        run(PAUSED_, PAUSED, commands=[RESUME]),
        Verdict.RESUME,
        "the pause was lifted",
    ),
    Row(
        "run: paused, /bot",
        run(PAUSED_, PAUSED, commands=[START]),
        Verdict.RESUME,
        "the pause was lifted",
    ),
    Row(
        "run: paused, label removed, /bot pause",
        run(PAUSED_, commands=[PAUSE]),
        Verdict.PAUSE,
        "`/bot pause`",
    ),
    # -- caps (docs/architecture.md, invariant 16): a cap asks, it does not destroy ----------
    Row(
        "plan: paused at a cap",
        plan(capped(), PAUSED),
        Verdict.CONTINUE,
        "a saved run: resumed, its controls read again",
    ),
    Row("start: paused at a cap", start(capped(), False), Verdict.CONTINUE, "a saved run"),
    Row(
        "run: at the step cap",
        run(RUNNING, commands=[], spent=Cap.STEPS),
        Verdict.CAPPED,
        "the steps allowance is spent",
    ),
    Row(
        "run: at the token cap",
        run(RUNNING, "bug", commands=[], spent=Cap.TOKENS),
        Verdict.CAPPED,
        "the tokens allowance is spent",
    ),
    Row(
        "run: at the cost cap",
        run(RUNNING, commands=[], spent=Cap.COST),
        Verdict.CAPPED,
        "the cost allowance is spent",
    ),
    # Only a resume after the cap's pause renews the allowance.
    Row(
        "run: at the cap, /bot resume written while it ran",
        run(RUNNING, commands=[RESUME], spent=Cap.TOKENS),
        Verdict.CAPPED,
        "the tokens allowance is spent",
    ),
    Row(
        "run: at the cap, /bot stop",
        run(RUNNING, commands=[STOP], spent=Cap.COST),
        Verdict.STOP,
        "`/bot stop`",
    ),
    Row(
        "run: at the cap, stopped label",
        run(RUNNING, STOPPED, commands=[], spent=Cap.STEPS),
        Verdict.STOP,
        "the stopped label",
    ),
    # A pause at the same check as the cap: one pause, with the cap's comment.
    Row(
        "run: at the cap, a writer's /bot pause",
        run(RUNNING, commands=[PAUSE], spent=Cap.STEPS),
        Verdict.CAPPED,
        "`/bot pause`, and the steps allowance is spent",
    ),
    Row(
        "run: at the cap, a person's paused label",
        run(RUNNING, PAUSED, commands=[], spent=Cap.COST),
        Verdict.CAPPED,
        "the paused label, and the cost allowance is spent",
    ),
    Row(
        "run: paused by a person, at a cap configured lower since",
        run(state(Status.PAUSED), PAUSED, commands=[], spent=Cap.STEPS),
        Verdict.PAUSE,
        "the paused label",
    ),
    Row(
        "run: at the cap, closed",
        run(RUNNING, open=False, spent=Cap.COST),
        Verdict.CLOSED,
        "the thread is closed or merged",
    ),
    Row(
        "run: paused at a cap, its label on",
        run(capped(), PAUSED, commands=[], spent=Cap.STEPS),
        Verdict.PAUSE,
        "the paused label",
    ),
    Row(
        "run: paused at a cap, /bot resume",
        run(capped(), PAUSED, commands=[RESUME], spent=Cap.STEPS),
        Verdict.RESUME,
        "the pause was lifted",
    ),
    Row(
        "run: paused at a cap, /bot",
        run(capped(Cap.COST), PAUSED, commands=[START], spent=Cap.COST),
        Verdict.RESUME,
        "the pause was lifted",
    ),
    Row(
        "run: paused at a cap, the label removed by a writer",
        run(capped(Cap.TOKENS), commands=[], spent=Cap.TOKENS),
        Verdict.RESUME,
        "the pause was lifted",
    ),
    Row(
        "run: paused at a cap, /bot resume, then /bot pause",
        run(capped(), PAUSED, commands=[RESUME, PAUSE], spent=Cap.STEPS),
        Verdict.PAUSE,
        "`/bot pause`",
    ),
    Row(
        "run: paused at a cap, /bot stop",
        run(capped(), PAUSED, commands=[STOP], spent=Cap.STEPS),
        Verdict.STOP,
        "`/bot stop`",
    ),
    # The bot stopped between saving the cap's pause and putting its label on.
    Row(
        "run: paused at a cap, its label still owed",
        run(capped(applied=False), commands=[], spent=Cap.STEPS),
        Verdict.PAUSE,
        "paused at a cap, its label still owed",
    ),
    Row(
        "run: paused at a cap, its label still owed, /bot resume",
        run(capped(applied=False), commands=[RESUME], spent=Cap.STEPS),
        Verdict.RESUME,
        "the pause was lifted",
    ),
    Row(
        "run: paused at a cap, closed",
        run(capped(), PAUSED, open=False),
        Verdict.CLOSED,
        "the thread is closed or merged",
    ),
]


@pytest.mark.parametrize("row", TABLE, ids=[row.name for row in TABLE])
def test_may_run(row: Row) -> None:
    assert may_run(row.facts) == Decision(row.verdict, row.reason, row.need)


def test_the_table_has_every_verdict_and_unique_names() -> None:
    assert {row.verdict for row in TABLE} == set(Verdict)
    assert len({row.name for row in TABLE}) == len(TABLE)
