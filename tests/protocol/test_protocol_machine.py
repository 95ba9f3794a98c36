"""The whole comment and control protocol, driven by generated orderings (issue 10, D7).

A hypothesis `RuleBasedStateMachine` drives the real `Daemon` (in process, `tests.rig.Rig`)
against the emulator, on GitHub and GitLab, with every event in its own second (`StepClock`)
or many in one (the emulator's whole-second wall clock). Events happen between polls or while
the model is thinking (they are queued and applied inside the scripted model's next call).
When no turn is scripted, the model's call ends the process mid-turn (the stop event, as
SIGTERM would), leaving a cut turn with a pending tool call for the next poll or restart.

After every rule, from the forge and the state dir:
- no comment version is delivered twice in one run, and delivered talk reached the model;
- the fetch cursor never passes a version that is neither delivered nor deliberately skipped;
- a task that reached `done` settled every human comment version on the thread;
- while a writer's pause or stop (command or label), or a close, was in force: no bot comment
  but the state's own announcement (or a notice that a non-writer's control was ignored), no
  commit, no pull request, no label added but the state's own;
- a poll that checked an open task undid the paused or stopped label `bob` (read access)
  changed before it, each with a notice naming that label event (said once: the markers);
- no bot comment was posted twice; the status label matches the saved status;
- a run that reaches the step cap (`STEP_CAP`, small: a model that keeps calling tools gets
  there) is paused, never failed, with one cap comment per cap reached, and from the cap to a
  writer's resume no tool call runs and no model call is made (docs/architecture.md,
  invariant 16); a writer's `/bot resume` continues it, and it can end done.

CI runs `PROTOCOL_EXAMPLES` examples (default 10) per forge and clock; set it higher to search
longer, e.g. `PROTOCOL_EXAMPLES=500 .venv/bin/pytest tests/protocol`. The same machine runs with
the state in PostgreSQL (a fresh database per example): `PROTOCOL_PG_EXAMPLES` (default 5).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from bot.core.clock import format_time
from bot.core.config import LabelSettings
from bot.model.state import Status, TaskState
from bot.service.daemon import Daemon
from bot.task.cap_note import CAP_HEADER, REFUSED_HEADER
from bot.task.labels import label_for
from bot.task.lifecycle import CLOSED_NOTE, PAUSED_NOTE, STOPPED_NOTE
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer
from bot_sandbox.world import SComment, SEvent, StepClock, SThread
from tests.conftest import ALICE_TOKEN, BOT_TOKEN, REPO
from tests.rig import Rig, comment_id
from tests.store.helpers import migrated

EXAMPLES = int(os.environ.get("PROTOCOL_EXAMPLES", "10"))
# The same machine with the state in PostgreSQL (a fresh database per example).
PG_EXAMPLES = int(os.environ.get("PROTOCOL_PG_EXAMPLES", "5"))
LABELS = LabelSettings()
STATUS_LABELS = {label_for(s, LABELS) for s in Status}
MARKER = re.compile(r"<!-- bot:[^>]*:(?:ignored-(?:label:)?)?(\d+) -->")
COMMANDS = ("pause", "resume", "stop")
CONTROL_LABELS = {"paused": LABELS.paused, "stopped": LABELS.stopped, "trigger": LABELS.trigger}
# What the bot may say while a mode is in force: the state's own announcement, and that it
# ignored a non-writer's control (task/gate.py says so whatever the task is doing).
ALLOWED_SAYING = {
    "paused": (PAUSED_NOTE,),
    "stopped": (STOPPED_NOTE,),
    "closed": (CLOSED_NOTE, STOPPED_NOTE),
    "capped": (CAP_HEADER, REFUSED_HEADER),
}
# Model calls per run before the task pauses and asks: small, so that orderings reach it.
STEP_CAP = 3
IGNORED = re.compile(r"<!-- bot:[^>]*:ignored-(?:label:)?(\d+) -->")  # GitLab: label:<id>


def seeded_server(step_clock: bool) -> ForgeServer:
    server = ForgeServer()
    world = server.world
    if step_clock:
        world.clock = StepClock()  # type: ignore[method-assign]
    world.add_user("coding-bot", token=BOT_TOKEN)
    world.add_user("alice", token=ALICE_TOKEN)
    roles = {"alice": "write", "bob": "read", "coding-bot": "write"}
    files = {"README.md": "# app\n", "src/app.py": "print('hi')\n"}
    for platform in ("github", "gitlab"):
        world.add_repo(platform, REPO, files=files, roles=roles)
    return server.start()


class Protocol(RuleBasedStateMachine):
    platform = "github"
    step_clock = True
    database: Callable[[], str] | None = None  # a fresh migrated PostgreSQL database, or files

    def __init__(self) -> None:
        super().__init__()
        self.server = seeded_server(self.step_clock)
        self.model = LLMServer().start()
        self.model.policy = self._policy
        self.state_dir = Path(tempfile.mkdtemp(prefix="protocol-"))
        self.rig = Rig(self.server, self.model, self.platform, self.state_dir)
        self.rig.llm_options = f", max_steps: {STEP_CAP}"
        if self.database is not None:
            self.rig.extra_config = f"store: {{backend: postgres, dsn: '{self.database()}'}}"
            assert self.rig.store().shared  # the machine really reads PostgreSQL
        self.daemon: Daemon | None = None
        self.thread: SThread | None = None
        self.queued: list[Callable[[], None]] = []  # events for the model's next call
        self.turns: list[dict[str, Any]] = []  # scripted replies, oldest first
        self.talk: list[int] = []  # raw ids of human comments the rules may edit or delete
        self.controls: list[tuple[int, str]] = []  # (world sequence, event) in order
        self.commits: list[int] = []  # world sequence of every commit pushed after seeding
        self.counter = 0
        self.polled = 0  # world sequence at the start of the last poll
        # Each cap reached, by (run, step): the model requests and tool results at the pause.
        self.caps: dict[tuple[int, int], tuple[int, int]] = {}
        self._watch_commits()

    def teardown(self) -> None:
        if self.daemon is not None:
            self.daemon.close()
        self.rig.close()
        self.model.stop()
        self.server.stop()
        shutil.rmtree(self.state_dir, ignore_errors=True)

    # -- the world's clock of events ------------------------------------------------------------

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def _seq(self) -> int:
        """A point in the world's order of things: comment ids come from the same counter."""
        return self.server.world.next_id()

    def _event(self, during_model: bool, apply: Callable[[], None]) -> None:
        if during_model:
            self.queued.append(apply)
        else:
            apply()

    def _policy(self, request: dict[str, Any]) -> dict[str, Any]:
        events, self.queued = self.queued, []
        for apply in events:
            apply()
        if self.turns:
            return self.turns.pop(0)
        # Nothing scripted: the daemon is told to stop while the model thinks, so this
        # reply's tool call is left pending for the next process (a cut turn).
        self.rig.stop.set()
        return {"tool_calls": [("post_comment", {"body": f"note-idle-{self._next()}"})]}

    def _watch_commits(self) -> None:
        """Record when each commit is made, on the world's clock of events."""
        repo = self.server.world.repo(self.platform, REPO)
        commit = repo.commit

        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.commits.append(self._seq())
            return commit(*args, **kwargs)

        repo.commit = recorded  # type: ignore[method-assign]

    # -- rules ----------------------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        self.thread = self.rig.issue()
        self.daemon = self.rig.daemon()

    @rule(writer=st.booleans(), during_model=st.booleans())
    def human_comment(self, writer: bool, during_model: bool) -> None:
        author = "alice" if writer else "bob"
        body = f"talk-{self._next()} from {author}"

        def apply() -> None:
            self.talk.append(self._add(body, author).id)

        self._event(during_model, apply)

    @precondition(lambda self: bool(self.talk))
    @rule(data=st.data(), during_model=st.booleans())
    def edit(self, data: st.DataObject, during_model: bool) -> None:
        target = data.draw(st.sampled_from(self.talk))
        body = f"talk-{self._next()} (an edit)"

        def apply() -> None:
            if target in self.talk:
                self.server.world.edit_comment(target, body)

        self._event(during_model, apply)

    @precondition(lambda self: bool(self.talk))
    @rule(data=st.data(), during_model=st.booleans())
    def delete(self, data: st.DataObject, during_model: bool) -> None:
        target = data.draw(st.sampled_from(self.talk))

        def apply() -> None:
            if target in self.talk:
                self.talk.remove(target)
                self.server.world.delete_comment(target)

        self._event(during_model, apply)

    @rule(verb=st.sampled_from(COMMANDS), writer=st.booleans(), during_model=st.booleans())
    def command(self, verb: str, writer: bool, during_model: bool) -> None:
        author = "alice" if writer else "bob"

        def apply() -> None:
            comment = self._add(f"/bot {verb}", author)
            if writer:
                self.controls.append((comment.id, verb))

        self._event(during_model, apply)

    @rule(
        which=st.sampled_from(sorted(CONTROL_LABELS)),
        add=st.booleans(),
        writer=st.booleans(),
        during_model=st.booleans(),
    )
    def label(self, which: str, add: bool, writer: bool, during_model: bool) -> None:
        """A person adds or removes the paused, stopped or trigger label."""
        actor = "alice" if writer else "bob"

        def apply() -> None:
            event = self._toggle(CONTROL_LABELS[which], add, actor)
            if event is not None and writer:
                self.controls.append((event.id, f"{'+' if add else '-'}{which}"))

        self._event(during_model, apply)

    @rule(during_model=st.booleans())
    def close(self, during_model: bool) -> None:
        def apply() -> None:
            self._set_state("closed")
            self.controls.append((self._seq(), "close"))

        self._event(during_model, apply)

    @rule()
    def reopen_with_trigger(self) -> None:
        assert self.thread is not None
        self.controls.append((self._seq(), "reopen"))
        self._set_state("open")
        if LABELS.trigger not in self.thread.labels:
            self.rig.set_labels(self.thread, [*self.thread.labels, LABELS.trigger])

    @rule(
        tools=st.lists(st.sampled_from(["note", "write"]), max_size=3),
        end=st.sampled_from(["none", "finish", "answer"]),
    )
    def model_turn(self, tools: list[str], end: str) -> None:
        """The model's next reply: zero to three tool calls, then maybe the final answer."""
        calls: list[tuple[str, Any]] = [
            ("post_comment", {"body": f"note-{self._next()}"})
            if tool == "note"
            else ("write_file", {"path": "src/app.py", "content": f"print({self._next()})\n"})
            for tool in tools
        ]
        if end == "finish":
            calls.append(("finish", {"summary": f"final-{self._next()}"}))
        if calls:
            self.turns.append({"tool_calls": calls})
        else:
            self.turns.append({"content": f"final-{self._next()}"})

    @rule(tools=st.lists(st.sampled_from(["note", "write"]), min_size=1, max_size=2))
    def keep_calling_tools(self, tools: list[str]) -> None:
        """The model calls tools turn after turn, never finishing, and the daemon polls: a
        running task reaches the step cap."""
        for _ in range(STEP_CAP):
            self.model_turn(tools, "none")
        self.poll()

    @precondition(lambda self: self._capped() is not None and not self.queued)
    @rule()
    def writer_resumes_at_the_cap(self) -> None:
        """A writer's `/bot resume` continues a task paused at its cap, which ends done."""
        assert self.thread is not None
        self.poll()  # what came before is read first: a stop in the same check would win
        if self._capped() is None or self.thread.state != "open":
            return
        if LABELS.stopped in self.thread.labels:
            return  # a stop wins over the resume (a non-writer's label: undone next poll)
        comment = self._add("/bot resume", "alice")
        self.controls.append((comment.id, "resume"))
        self.turns.insert(0, {"tool_calls": [("finish", {"summary": f"final-{self._next()}"})]})
        self.poll()
        state = self._state()
        assert state is not None and state.status is Status.DONE, state and state.status

    @precondition(lambda self: self._capped() is not None and not self.queued)
    @rule(word=st.sampled_from(["1000x", "0x", "lots", "x2", "+5 kg"]))
    def writer_asks_for_what_cannot_be_granted(self, word: str) -> None:
        """At the cap, a writer's `/bot resume <word>` that grants nothing is answered and
        resumes nothing: the task stays paused at its cap (nothing runs: the invariants)."""
        assert self.thread is not None
        self.poll()  # what came before is read first
        hit = self._capped()
        if hit is None or self.thread.state != "open" or LABELS.stopped in self.thread.labels:
            return
        said = len(self.thread.comments)
        self._add(f"/bot resume {word}", "alice")
        self.poll()
        assert self._capped() == hit, (hit, self._capped())
        answer = [c.body for c in self.thread.comments[said:] if c.author.login == "coding-bot"]
        assert len(answer) == 1 and answer[0].startswith(REFUSED_HEADER), answer

    @rule()
    def restart(self) -> None:
        """A new process on the same state dir (the old one was stopped or killed)."""
        if self.daemon is not None:
            self.daemon.close()
        self.rig.stop.clear()
        self.daemon = self.rig.daemon()

    @rule()
    def poll(self) -> None:
        assert self.daemon is not None
        before = self._status()
        start = self._seq()  # a run that starts in this poll starts here: before any model call
        self.polled = start
        self.rig.stop.clear()
        self.daemon.run_once()
        state = self._state()
        if state is None or not state.initialized:
            return
        if before is None or before[0] != state.run or before[1] == "new":
            self.controls.append((start, "run"))  # older commands are history to a new run
        if state.status is Status.DONE and before != (state.run, "done"):
            self._all_settled(state)
        if state.status in (Status.RUNNING, Status.PAUSED) and self.thread.state == "open":
            self._non_writers_controls_undone(start, state.status)
        hit = self._capped()
        if hit is not None and hit not in self.caps:
            self._cap_reached(hit)

    # -- helpers --------------------------------------------------------------------------------

    def _capped(self) -> tuple[int, int] | None:
        """(run, step) of the cap the task is paused at, if it is."""
        state = self._state()
        if state is None or state.status is not Status.PAUSED or state.capped is None:
            return None
        return state.run, state.step

    def _cap_comments(self) -> list[int]:
        """Ids of the bot's cap comments, oldest first."""
        if self.thread is None:
            return []
        bot = [c for c in self.thread.comments if c.author.login == "coding-bot"]
        return [c.id for c in bot if c.body.startswith(CAP_HEADER)]

    def _tool_results(self) -> int:
        return sum(1 for run in self._runs() for e in run if e.get("role") == "tool")

    def _cap_reached(self, hit: tuple[int, int]) -> None:
        """A new cap: the reply that reached it has no tool result (the pause came at the
        safe point right after it); from now the mode is "capped" for the other invariants."""
        entries = self._runs()[-1]
        last = max(i for i, e in enumerate(entries) if e.get("role") == "assistant")
        ran = [e for e in entries[last + 1 :] if e.get("role") == "tool"]
        assert not ran, f"a tool call ran after the cap: {ran}"
        self.caps[hit] = (len(self.model.requests), self._tool_results())
        said = self._cap_comments()
        if said:
            self.controls.append((said[-1], "cap"))

    def _add(self, body: str, author: str) -> SComment:
        assert self.thread is not None
        world = self.server.world
        return world.add_comment(
            self.platform, REPO, self.thread.number, body, author=author, kind="issue"
        )

    def _toggle(self, name: str, add: bool, actor: str) -> SEvent | None:
        """Add or remove one label as `actor`, atomically against the bot's own changes; the
        forge's event, or None when nothing changed (no event on the forge either)."""
        assert self.thread is not None
        world = self.server.world
        with world.lock:
            labels = list(self.thread.labels)
            if (name in labels) == add:
                return None
            if not add and name == LABELS.stopped and not self._stopped_seen():
                return None  # see _mode_at: a stop the bot never saw cannot be taken back
            changed = [*labels, name] if add else [x for x in labels if x != name]
            world.set_labels(
                self.platform, REPO, self.thread.number, changed, kind="issue", actor=actor
            )
            return self.thread.events[-1]

    def _stopped_seen(self) -> bool:
        state = self._state()
        return state is not None and state.status is Status.STOPPED

    def _set_state(self, state: str) -> None:
        assert self.thread is not None
        self.server.world.set_state(self.platform, REPO, self.thread.number, state, kind="issue")

    def _bot_events(self, kind: str) -> list[SEvent]:
        assert self.thread is not None
        events = self.thread.events
        return [e for e in events if e.kind == kind and e.actor.login == "coding-bot"]

    def _latest(self, kind: str | None, name: str) -> SEvent | None:
        """The newest event of `kind` (any kind: None) on the label `name`."""
        assert self.thread is not None
        events = self.thread.events
        found = [e for e in events if kind in (None, e.kind) and e.name == name]
        return found[-1] if found else None

    def _non_writers_controls_undone(self, start: int, status: Status) -> None:
        """A poll that checked an open task's controls took off the paused or stopped label
        `bob` added before it, and put back the paused label he took off a paused task, each
        with its notice (task/gate.py)."""
        assert self.thread is not None
        changes = [
            ("labeled", n) for n in (LABELS.paused, LABELS.stopped) if n in self.thread.labels
        ]
        if status is Status.PAUSED and LABELS.paused not in self.thread.labels:
            changes.append(("unlabeled", LABELS.paused))
        noticed = {int(n) for body in self.thread_bot_bodies() for n in IGNORED.findall(body)}
        for kind, name in changes:
            event = self._latest(kind, name)
            if event is not None and event.actor.login == "bob" and event.id < start:
                raise AssertionError(f"bob's {kind} {name} (event {event.id}) still in force")
        for event in self.thread.events:
            if (
                event.actor.login == "bob"
                and event.id < start
                and event.name
                in (
                    LABELS.paused,
                    LABELS.stopped,
                )
            ):
                undone = self._undone_after(event)
                assert not undone or event.id in noticed, f"silent on {event}"

    def _undone_after(self, event: SEvent) -> bool:
        """Did the bot undo `event` (the label taken off, or put back)?"""
        assert self.thread is not None
        opposite = "unlabeled" if event.kind == "labeled" else "labeled"
        later = [e for e in self.thread.events if e.id > event.id and e.name == event.name]
        return bool(later) and later[0].kind == opposite and later[0].actor.login == "coding-bot"

    def thread_bot_bodies(self) -> list[str]:
        assert self.thread is not None
        return [c.body for c in self.thread.comments if c.author.login == "coding-bot"]

    def _state(self) -> TaskState | None:
        if self.thread is None:
            return None
        return self.rig.store().load(self.rig.key(self.thread))

    def _status(self) -> tuple[int, str] | None:
        state = self._state()
        if state is None:
            return None
        return state.run, state.status.value if state.initialized else "new"

    def _runs(self) -> list[list[dict[str, Any]]]:
        assert self.thread is not None
        store, key = self.rig.store(), self.rig.key(self.thread)
        state = store.load(key)
        earlier = range(1, state.run if state is not None else 1)
        return [store.archived_conversation(key, run) for run in earlier] + [
            store.conversation(key).entries()
        ]

    def _humans(self) -> list[SComment]:
        assert self.thread is not None
        return [c for c in self.thread.comments if c.author.login != "coding-bot"]

    def _settled(self, state: TaskState) -> dict[str, str]:
        settled = dict(state.seen)
        for entry in self._runs()[-1]:
            for ref in entry.get("comments") or []:
                settled[ref["id"]] = max(settled.get(ref["id"], ""), ref["updated_at"])
        return settled

    def _all_settled(self, state: TaskState) -> None:
        """Done: every human comment version on the thread was delivered or skipped."""
        settled = self._settled(state)
        for comment in self._humans():
            cid = comment_id(self.platform, comment.id)
            version = format_time(comment.updated_at)
            assert settled.get(cid, "") >= version, f"{cid}@{version} never reached the model"

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def delivered_at_most_once(self) -> None:
        if self.thread is None:
            return
        for entries in self._runs():
            refs = [
                (ref["id"], ref["updated_at"]) for e in entries for ref in e.get("comments") or []
            ]
            assert len(refs) == len(set(refs)), f"delivered twice: {refs}"

    @invariant()
    def delivered_talk_reached_the_model(self) -> None:
        """A delivered batch followed by a model reply was in that call's messages."""
        if self.thread is None:
            return
        shown = self.model.seen_text()
        for entries in self._runs():
            for n, entry in enumerate(entries):
                if entry.get("kind") != "comments":
                    continue
                answered = any(e.get("role") == "assistant" for e in entries[n + 1 :])
                assert not answered or str(entry["content"]) in shown, entry["content"]

    @invariant()
    def cursor_never_passes_an_unsettled_version(self) -> None:
        state = self._state()
        if state is None or not state.initialized or state.status.terminal:
            return
        settled = self._settled(state)
        for comment in self._humans():
            cid = comment_id(self.platform, comment.id)
            version = format_time(comment.updated_at)
            if settled.get(cid, "") < version:
                since = state.comments_since
                assert since is None or since <= version, f"cursor {since} passed {cid}@{version}"

    @invariant()
    def nothing_posted_while_paused_stopped_or_closed(self) -> None:
        """Only the state's own announcement, or that a non-writer's control was ignored."""
        if self.thread is None:
            return
        for comment in self.thread.comments:
            if comment.author.login != "coding-bot" or IGNORED.search(comment.body):
                continue
            mode = _mode_at(self.controls, comment.id)
            if mode != "run":
                said = comment.body.split("\n")[0]
                assert comment.body.startswith(ALLOWED_SAYING[mode]), (
                    f"{said!r} posted while {mode}"
                )

    @invariant()
    def nothing_committed_while_paused_stopped_or_closed(self) -> None:
        for at in self.commits:
            mode = _mode_at(self.controls, at)
            assert mode == "run", f"commit made while {mode}"

    @invariant()
    def no_label_but_the_states_own_while_paused_stopped_or_closed(self) -> None:
        if self.thread is None:
            return
        own = {
            "paused": LABELS.paused,
            "stopped": LABELS.stopped,
            "closed": LABELS.stopped,
            "capped": LABELS.paused,
        }
        for event in self._bot_events("labeled"):
            mode = _mode_at(self.controls, event.id)
            assert mode == "run" or event.name == own[mode], f"{event.name} added while {mode}"

    @invariant()
    def only_non_writers_controls_are_called_ignored(self) -> None:
        """Each notice names one forge event (said once: `no_bot_comment_twice`), by `bob`."""
        if self.thread is None:
            return
        actors = {event.id: event.actor.login for event in self.thread.events}
        for comment in self.thread.comments:
            found = IGNORED.search(comment.body)
            if comment.author.login == "coding-bot" and found:
                assert actors.get(int(found.group(1))) == "bob", comment.body

    @invariant()
    def nothing_published_while_paused_stopped_or_closed(self) -> None:
        for request in self.server.world.all_threads():
            if request.change is not None:  # a pull/merge request the bot opened
                mode = _mode_at(self.controls, request.id)
                assert mode == "run", f"change request opened while {mode}"

    @invariant()
    def no_bot_comment_twice(self) -> None:
        if self.thread is None:
            return
        bot = [c.body for c in self.thread.comments if c.author.login == "coding-bot"]
        markers = [m.group(0) for body in bot for m in [MARKER.search(body)] if m]
        assert len(markers) == len(bot) and len(set(markers)) == len(markers), bot
        notes = [b.split("\n")[0] for b in bot if b.startswith("note-")]
        assert len(notes) == len(set(notes)), notes

    @invariant()
    def a_cap_pauses_and_nothing_fails(self) -> None:
        """No ordering here fails a task (no faults, no malformed replies): reaching the step
        cap pauses it instead (before issue 21 it failed the task)."""
        state = self._state()
        assert state is None or state.status is not Status.FAILED, state and state.reason

    @invariant()
    def nothing_runs_at_the_cap(self) -> None:
        """From the cap to the resume: no model call, no tool call."""
        hit = self._capped()
        if hit is None or hit not in self.caps:
            return  # reached in the poll that just ran: recorded by `poll`
        now = (len(self.model.requests), self._tool_results())
        assert now == self.caps[hit], f"at the cap {hit}: (requests, tool results) {now}"

    @invariant()
    def one_cap_comment_per_cap(self) -> None:
        """Each cap reached is said once (a comment still owed counts: posted next run)."""
        state = self._state()
        pending = state.pending_post if state is not None else None
        owed = pending is not None and pending.purpose == "capped"
        said = self._cap_comments()
        assert len(said) + int(owed) == len(self.caps), (len(said), sorted(self.caps))

    @invariant()
    def label_matches_saved_status(self) -> None:
        state = self._state()
        if state is None or self.thread is None or not state.initialized:
            return
        if state.labels_applied != state.status:
            return  # owed, and repaired by the next run (the state says so)
        shown = set(self.thread.labels) & STATUS_LABELS
        own = label_for(state.status, LABELS)
        # A person's change the bot has not checked yet: made since the last poll began, or
        # on a finished task (no check runs for it)
        unseen = set()
        for name in STATUS_LABELS:
            event = self._latest(None, name)
            human = event is not None and event.actor.login != "coding-bot"
            if human and event is not None and (state.status.terminal or event.id > self.polled):
                unseen.add(name)
        assert shown - unseen == {own} - unseen, (state.status, self.thread.labels)


def _mode_at(controls: list[tuple[int, str]], seq: int) -> str:
    """What writers and the thread asked for at world sequence `seq`.

    Writers' labels count like their commands: the paused label added pauses and removed
    resumes a paused task; the stopped label added stops. Taking the stopped label off does
    not restart a stopped task (the trigger label or `/bot` does, seen as the next "run"), and
    the rules take it off only once the bot saw the stop (`Protocol._toggle`). The trigger
    label starts a finished task again, which is the next "run" too. A cap reached while
    running is "capped" (the bot's own pause; also when a writer's pause came at the same
    check): a writer's resume or taking the paused label off ends it, as a pause.
    """
    mode = "run"
    for at, event in sorted(controls):
        if at > seq:
            break
        if event in ("run", "reopen"):
            mode = "run"
        elif event == "close":
            mode = "closed"
        elif mode == "closed":
            continue  # controls on a closed thread start nothing
        elif event in ("stop", "+stopped"):
            mode = "stopped"
        elif event in ("pause", "+paused") and mode != "stopped":
            mode = "paused"
        elif event == "cap" and mode in ("run", "paused"):
            mode = "capped"  # a writer's pause read at the cap's check is that one pause
        elif event == "resume":
            mode = "run"  # also a stopped or finished task: a writer's `/bot resume` hands it back
        elif event == "-paused" and mode in ("paused", "capped"):
            mode = "run"
    return mode


@pytest.mark.parametrize("platform", ["github", "gitlab"])
@pytest.mark.parametrize("clock", ["step", "same-second"])
@pytest.mark.parametrize("backend", ["files", "postgres"])
def test_protocol_holds_in_every_order(
    platform: str, clock: str, backend: str, request: pytest.FixtureRequest
) -> None:
    database = None
    if backend == "postgres":  # the same machine with the state in PostgreSQL
        cluster = request.getfixturevalue("pg_cluster")
        database = staticmethod(lambda: migrated(cluster.create_database()))
    machine = type(
        f"Protocol_{platform}_{clock}_{backend}",
        (Protocol,),
        {"platform": platform, "step_clock": clock == "step", "database": database},
    )
    examples = EXAMPLES if backend == "files" else PG_EXAMPLES
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=12,
            deadline=None,
            derandomize=examples <= 25,  # CI: the same orderings every run
            suppress_health_check=list(HealthCheck),
        ),
    )
