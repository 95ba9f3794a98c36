"""One trust rule for every control: a label or an assignment counts only when the person who
applied it may instruct the bot (write access, and `access.allowed_users` when set), the same
rule `/bot` commands follow.

Who applied a label or an assignment comes from the forge's own record (`control_events`), not
from the label's presence. A control from anyone else is ignored: the label is taken off again
(so the thread's labels keep mirroring the task's state; an assignment is left as it is), and
the bot says so once, in a comment whose hidden marker names the ignored event, so a repeat
after a crash finds it and says nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from bot.core.config import LabelSettings
from bot.core.log import get_logger
from bot.forge.base import Forge
from bot.model.state import Status, TaskState
from bot.model.thread import ControlEvent, TaskKey
from bot.model.trust import Trust
from bot.task.handover import Starting, StartSignals, Verdict, may_run

log = get_logger(__name__)


@dataclass(frozen=True)
class Gate:
    forge: Forge
    key: TaskKey
    bot_login: str
    trust: Trust
    labels: LabelSettings

    # -- starting ---------------------------------------------------------------------------

    def start_signals(self, labels: frozenset[str], assignees: frozenset[str]) -> StartSignals:
        """Who gave the start signals on the thread (the trigger and processing labels, the
        bot's assignment, in this order): read up to the first one from a trusted person (or
        the bot itself). A signal the forge has no record of is from no one trusted."""
        wanted = [("labeled", name) for name in (self.labels.trigger, self.labels.processing)]
        signals = [(kind, name) for kind, name in wanted if name in labels]
        if self.bot_login in assignees:
            signals.append(("assigned", self.bot_login))
        if not signals:
            return StartSignals(given=False)
        events = self.forge.control_events(self.key)
        ignored: list[ControlEvent] = []
        for kind, name in signals:
            event = _latest(events, kind, name)
            if event is not None and self._trusted(event.actor):
                return StartSignals(True, (kind, name), tuple(ignored))
            if event is not None:
                ignored.append(event)
            else:
                log.warning("control_actor_unknown", control=kind, name=name)
        return StartSignals(True, None, tuple(ignored))

    def refuse(self, signals: StartSignals) -> None:
        """Undo the start signals others gave, and say so once each."""
        for event in signals.ignored:
            self._ignore(event)

    def start_allowed(self, labels: frozenset[str], assignees: frozenset[str]) -> bool:
        """May a first run start (bot/task/handover.py)? Yes if one start signal on the
        thread comes from a trusted person, or there is none (a writer's comment planned it);
        else the signals are undone."""
        signals = self.start_signals(labels, assignees)
        first = Starting(None, self.labels, fresh=True, signals=signals)
        if may_run(first).verdict is Verdict.IGNORE:
            self.refuse(signals)
            return False
        return True

    # -- while it runs ----------------------------------------------------------------------

    def of(
        self,
        state: Callable[[], TaskState],
        ignored: Callable[[ControlEvent], None] | None = None,
    ) -> GateLabels:
        """This gate as a running task's safe point asks it (the task's state read each time)."""
        return GateLabels(self, state, ignored)

    def filter(
        self,
        labels: frozenset[str],
        status: Status,
        applied: str | None,
        ignored: Callable[[ControlEvent], None] | None = None,
    ) -> frozenset[str]:
        """The thread's labels as trusted people left them: a control label an untrusted
        person added is taken out (and off the thread); the paused label an untrusted person
        removed from a paused task is put back. `ignored` hears of each control ignored, once
        (when the bot says so: a repeat after a crash finds it said and tells no one).

        Checked only when a control label is there that the bot did not put there itself (the
        paused label of a paused task is the bot's), or a paused task lost its label, so an
        ordinary step costs no request.
        """
        suspects = []
        if self.labels.stopped in labels:
            suspects.append(self.labels.stopped)
        if self.labels.paused in labels and not (
            status is Status.PAUSED and applied == Status.PAUSED.value
        ):
            suspects.append(self.labels.paused)
        resumed = status is Status.PAUSED and self.labels.paused not in labels
        if not suspects and not resumed:
            return labels
        events = self.forge.control_events(self.key)
        kept = set(labels)
        for name in suspects:
            event = _latest(events, "labeled", name)
            if event is None or self._trusted(event.actor):
                continue  # no record (an old label): the label is obeyed as before
            kept.discard(name)
            self._ignore(event, ignored)
        removal = _latest(events, "unlabeled", self.labels.paused) if resumed else None
        if removal is not None and not self._trusted(removal.actor):
            kept.add(self.labels.paused)  # still paused: the label goes back on
            self.forge.add_labels(self.key, [self.labels.paused])
            self._ignore(removal, ignored)
        return frozenset(kept)

    def labelled_at(self, name: str) -> datetime | None:
        """When the label `name` was last added (None: the forge has no record of it)."""
        event = _latest(self.forge.control_events(self.key), "labeled", name)
        return None if event is None else event.at

    # -- internals ------------------------------------------------------------------------------

    def _trusted(self, login: str) -> bool:
        if login.lower() == self.bot_login.lower():
            return True  # the bot's own labels follow its state
        if self.trust.allowed_users and login.lower() not in self.trust.allowed_users:
            return False
        return self.forge.permission(self.key.repo, login).can_write

    def _ignore(
        self, event: ControlEvent, ignored: Callable[[ControlEvent], None] | None = None
    ) -> None:
        what = {
            "assigned": f"assigned me to this {self._noun()}",
            "unlabeled": f"removed the label `{event.name}`",
        }.get(event.kind, f"added the label `{event.name}`")
        log.warning(
            "control_ignored", control=event.kind, name=event.name, actor=event.actor, id=event.id
        )
        if event.kind == "labeled":
            self.forge.remove_labels(self.key, [event.name])
        said = say_once(
            self.forge,
            self.key,
            self.bot_login,
            f"ignored-{event.id}",
            f"@{event.actor} {what}, but only people with write access to this repository can "
            "control me, so I ignored it. Someone with write access can add the label, assign "
            "me, or comment `/bot`.",
        )
        if said and ignored is not None:
            ignored(event)

    def _noun(self) -> str:
        return "pull request" if self.key.is_change_request else "issue"


def _latest(events: Iterable[ControlEvent], kind: str, name: str) -> ControlEvent | None:
    found = None
    for event in events:
        if event.kind == kind and event.name == name:
            found = event  # oldest first: the last one is the one in force
    return found


def say_once(forge: Forge, key: TaskKey, bot_login: str, tag: str, body: str) -> bool:
    """Post `body` unless the bot already posted a comment carrying this marker; whether it
    posted it now."""
    marker = f"<!-- bot:{key}:{tag} -->"
    for comment in forge.list_comments(key):
        if comment.author == bot_login and marker in comment.body:
            return False
    forge.post_comment(key, f"{body}\n\n{marker}")
    return True


@dataclass(frozen=True)
class GateLabels:
    """`LabelTrust` for a safe point: the gate, with the task's status and applied labels;
    `ignored` hears of each control it ignores (the run's timeline)."""

    gate: Gate
    state: Callable[[], TaskState]
    ignored: Callable[[ControlEvent], None] | None = None

    def trusted(self, labels: frozenset[str]) -> frozenset[str]:
        current = self.state()
        return self.gate.filter(labels, current.status, current.labels_applied, self.ignored)

    def labelled_at(self, name: str) -> datetime | None:
        return self.gate.labelled_at(name)
