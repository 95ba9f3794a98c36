"""The step loop of one task, with its safe points (S).

    S  controls: labels + slash commands from writers -> stop / pause?  (also: closed, deleted)
    S  comments: detector.check() -> append to conversation (fsync) -> mark seen
       model:    one LLM call with the fitted conversation -> append reply
       tools:    S (controls) before each call; each call executed, result appended
       final:    S once more; new comments -> another turn, else finish

The seams: `lifecycle` (status and labels), `safepoint` (controls and comments), `turn`
(model call, tools, journal), `finishing` (publish and the final answer). This module wires
them and runs the loop; every step returns what happened, nothing jumps by exception.
State is saved after every step. Labels change only after the state on disk says so.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

import structlog

from bot.agent.commands import (
    CheckRound,
    CommandSession,
    checks_markdown,
    failing,
    fix_request,
    run_command_tool,
)
from bot.agent.instructions import author_trusted, repository_instructions, trusted_reader
from bot.agent.plan_tool import plan_tool
from bot.agent.read_comments import read_comments
from bot.agent.repo_checks import checks_for
from bot.agent.repo_tools import repo_tools
from bot.agent.tools import Tool, Toolbox, finish_tool, post_comment_tool, read_comments_tool
from bot.context.budget import truncate
from bot.context.engine import initial_context, opening_budget
from bot.context.tokens import TokenCounter
from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.config import Settings
from bot.core.log import Redactor, get_logger, redactor
from bot.core.metrics import Metrics
from bot.core.prompts import load_prompt
from bot.forge.base import Forge
from bot.forge.errors import AuthError, ForgeError
from bot.jail import Jail, WorkCopy
from bot.llm.base import LLMClient
from bot.model.state import Status, TaskState, now_iso
from bot.model.thread import TaskKey, Thread
from bot.model.trust import Identity, Trust
from bot.repo.destination import head_from_outside
from bot.repo.pinned import target_workspace, task_workspace
from bot.repo.pinning import pin
from bot.repo.workspace import Workspace
from bot.store.base import Store
from bot.store.errors import LeaseLost
from bot.task.comments import CommentDetectionManager, comment_ref
from bot.task.confidential import InternalNotes, withhold
from bot.task.controls import commands_since_finish, split_commands
from bot.task.failures import settle
from bot.task.fencing import fenced
from bot.task.finishing import finish
from bot.task.gate import Gate
from bot.task.handover import Decision, Need, Starting, Verdict, may_run
from bot.task.lifecycle import Lifecycle
from bot.task.mcp_run import McpLauncher, McpRun
from bot.task.outcome import Outcome
from bot.task.page_link import page_url
from bot.task.posting import Poster
from bot.task.record import Events, Stamped
from bot.task.report import what_i_did
from bot.task.safepoint import SafePoint
from bot.task.timeline import build_timeline
from bot.task.turn import Turn

__all__ = ["Deps", "Outcome", "TaskRunner"]

log = get_logger(__name__)


@dataclass(frozen=True)
class Deps:
    forge: Forge
    store: Store
    llm: LLMClient
    settings: Settings
    identity: Identity
    counter: TokenCounter
    stop: threading.Event
    metrics: Metrics = field(default_factory=Metrics)
    jail: Jail | None = None  # commands and checks; None: the agent edits without running
    clock: Clock = SYSTEM_CLOCK  # the daemon's: backoff, post intents, delivery delays, deadlines
    mcp: McpLauncher | None = None  # MCP servers (bot/task/mcp_run.py); None: none configured


class TaskRunner:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    def run(self, key: TaskKey, fresh: bool = False) -> Outcome:
        with (
            self.deps.store.task_lock(key) as lease,
            structlog.contextvars.bound_contextvars(task=str(key), repo=key.repo),
        ):
            # Every write of this run, to the forge and to the store, checks the lease first.
            deps = replace(
                self.deps, forge=fenced(self.deps.forge, lease), store=self.deps.store.fenced(lease)
            )
            run = _Run(deps, key)
            try:
                outcome = run.execute(fresh)
            except AuthError:
                raise
            except LeaseLost:
                # Another daemon has the task now (we were frozen or cut off past the lease):
                # nothing more is done here, not even a label or a log of the state.
                log.warning("lease_lost")
                return Outcome.INTERRUPTED
            except ForgeError as exc:
                if self.deps.stop.is_set():  # the daemon is stopping: not the task's fault
                    log.info("task_interrupted", reason="stopping", error=str(exc))
                    return Outcome.INTERRUPTED
                base = self.deps.settings.agent.retry_backoff_seconds
                life = run.life
                failed = settle(
                    exc,
                    life.state,
                    life.save,
                    lambda text: life.end(Status.FAILED, text),
                    base,
                    now=self.deps.clock.now(),
                )
                if not failed:  # a failed task has its reason on record (its status entry)
                    run.events.error("forge", str(exc), life.state.retry_at)
                return Outcome.FAILED if failed else Outcome.INTERRUPTED
            except OSError as exc:
                # Disk full or read-only state dir: the previous state file is intact (atomic
                # writes), and the task resumes from it once the disk is usable again.
                log.error(
                    "state_save_failed",
                    error=f"{type(exc).__name__}: {exc.strerror}",
                    path=str(exc.filename or ""),
                )
                return Outcome.INTERRUPTED
            finally:
                run.close()  # its MCP servers, and the jail's working copy when it made one
            if outcome is not Outcome.NOTHING:  # only a daemon that worked the task says so
                log.info("task_outcome", outcome=outcome.value)
            return outcome


class _Run:
    def __init__(self, deps: Deps, key: TaskKey) -> None:
        self.deps = deps
        self.key = key
        self.settings = deps.settings
        self.store = deps.store
        self.forge = deps.forge
        # Every entry the run appends carries its time (bot/task/record.py).
        self.conversation = Stamped(deps.store.conversation(key), deps.clock)
        self.events = Events(self.conversation)
        llm = self.settings.llm
        cap = max(256, (llm.context_window - llm.reserve_output_tokens) // 4)
        trust = Trust.from_settings(self.settings.access)
        # Every internal note version the model was shown, by this process or an earlier one.
        shown = [t for e in self.conversation.entries() for t in e.get("internal_texts") or []]
        internal = InternalNotes(self.forge, key, shown)
        self.detector = CommentDetectionManager(
            self.forge,
            key,
            deps.identity,
            trust,
            self.conversation,
            shorten=lambda text: truncate(text, cap, deps.counter),
            on_internal=internal.remember,
        )
        state = TaskState(key=str(key), created_at=now_iso(clock=deps.clock))
        self.poster = Poster(
            self.forge,
            key,
            deps.identity.login,
            self.store,
            state,
            internal,
            clock=deps.clock,
            events=self.events,
        )
        labels = self.settings.labels
        self.life = Lifecycle(
            self.forge, self.store, key, labels, self.detector, self.poster, self.events
        )
        self.life.adopt(state)
        self.gate = Gate(self.forge, key, deps.identity.login, trust, labels)
        self.safe = SafePoint(
            self.forge,
            key,
            self.detector,
            self.conversation,
            self.life,
            labels,
            deps.stop,
            deps.metrics,
            self.gate.of(lambda: self.state, self.events.ignored),
            llm,
            clock=deps.clock,
        )
        self._workspace: Workspace | None = None
        self._session: CommandSession | None = None
        self._mcp: McpRun | None = None
        if deps.mcp is not None:
            self._mcp = deps.mcp.run(key.repo, lambda: self._work_copy())
        self._toolbox = self._tools()
        self.turn = Turn(
            deps.llm,
            llm,
            deps.counter,
            self.conversation,
            self.life,
            self.safe,
            lambda: self._toolbox,
            deps.metrics,
            deps.clock,
        )

    @property
    def state(self) -> TaskState:
        return self.life.state

    # -- tools and the working copy -----------------------------------------------------------

    def _tools(self) -> Toolbox:
        tools = [
            finish_tool(),
            post_comment_tool(self._post_note),
            read_comments_tool(self._read_comments),
            plan_tool(self.poster, lambda: self.state),
        ]
        if self._workspace is not None:
            budget = self.settings.agent.tool_result_tokens
            trusted = self._code_trusted()
            tools += repo_tools(
                self._workspace, self.deps.counter, budget, trusted=trusted, clock=self.deps.clock
            )
            session = self._commands()
            if session is not None:
                tools.append(run_command_tool(session, self.deps.counter, budget))
            tools += self._mcp_tools(budget)
        return Toolbox(tools)

    def _mcp_tools(self, budget: int) -> list[Tool]:
        """The MCP servers' tools (their servers start here, once per run)."""
        if self._mcp is None:
            return []
        llm = self.settings.llm
        prompt = llm.context_window - llm.reserve_output_tokens
        return self._mcp.tools(self.deps.counter, budget, prompt, self.safe.watch)

    def _work_copy(self) -> WorkCopy:
        session = self._commands()
        assert session is not None  # `jail: true` servers need jail.enabled (config)
        return session.work_copy()

    def _commands(self) -> CommandSession | None:
        """The jail session of this run, made when the workspace is (None without a jail)."""
        if self.deps.jail is None or self._workspace is None:
            return None
        if self._session is None or self._session.workspace is not self._workspace:
            thread = self.safe.thread or self.forge.get_thread(self.key)
            trusted = author_trusted(self.forge, thread, self.detector.trust)
            assert self.state.base_sha is not None
            read = trusted_reader(self.forge, thread, self.state.base_sha, self._workspace, trusted)
            checks = checks_for(self.settings.jail, self.key.repo, read)
            self._close_session()
            self._session = CommandSession(
                self.deps.jail, self._workspace, checks, head_trusted=self._code_trusted(thread)
            )
        return self._session

    def _code_trusted(self, thread: Thread | None = None) -> bool:
        """Whether the pinned commit's code is trusted: an issue works on the default branch
        (or its own earlier branch); a request's head counts only from a writer (the rule of
        the instruction files)."""
        if not self.key.is_change_request:
            return True
        thread = thread or self.safe.thread or self.forge.get_thread(self.key)
        return author_trusted(self.forge, thread, self.detector.trust)

    def close(self) -> None:
        """The run's MCP servers closed, its working copy (the jail's) removed."""
        if self._mcp is not None:
            self._mcp.close()
        self._close_session()

    def _close_session(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def workspace(self) -> Workspace:
        if self._workspace is None:
            assert self.state.base_sha is not None
            self._workspace = task_workspace(
                self.forge, self.key, self.state.base_sha, self.state.changes, self.settings
            )
            self._toolbox = self._tools()
        return self._workspace

    def _read_comments(self, numbers: list[int]) -> str:
        entries = self.conversation.entries()
        # The opening context's numbering (an event entry may come before it: a thread that
        # closed or was deleted before its work began, then handed back).
        opening = next((e for e in entries if e.get("kind") == "initial"), {})
        legend: dict[str, str] = opening.get("legend", {})
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
        decision = self._may_start(Starting(loaded, self.settings.labels, fresh=fresh))
        if decision.verdict is Verdict.IGNORE:
            return Outcome.IGNORED
        self._load(loaded, decision.verdict is Verdict.NEW_RUN)
        owed_post = self.state.pending_post is not None
        if owed_post:
            self.poster.deliver(look_up=True)  # a post the previous process may have made
        if self.state.status.terminal:
            return self._settle(owed_post)
        if not self.state.initialized:
            read = self.safe.read_thread()
            if read.halt is not None:
                return read.halt  # closed or deleted before the work began
            assert self.safe.thread is not None
            self._initialize(self.safe.thread)
        # Controls first, before anything is built or any pending tool call runs: a paused
        # task costs this one check per cycle.
        check = self.safe.check(deliver=False)
        if check.halt is not None:
            return check.halt
        if self.state.labels_applied != self.state.status:
            self.life.sync_labels()
        self.workspace()
        return self._loop()

    def _may_start(self, facts: Starting) -> Decision:
        """The job's plan asked again under the lease (bot/task/handover.py); the thread, who
        gave its start signals and the comments since the finish are read only when asked."""
        decision = may_run(facts)
        if decision.need is Need.SIGNALS:
            thread = self.forge.get_thread(self.key)
            signals = self.gate.start_signals(thread.labels, thread.assignees)
            facts = replace(facts, labels=thread.labels, signals=signals)
            decision = may_run(facts)
        if decision.need is Need.COMMANDS:
            assert facts.state is not None
            trust = self.detector.trust
            since = commands_since_finish(
                self.forge, self.key, facts.state, self.deps.identity, trust
            )
            decision = may_run(replace(facts, commands=since))
        if decision.verdict is Verdict.IGNORE and facts.signals is not None:
            self.gate.refuse(facts.signals)  # undone, and said once
        return decision

    def _load(self, loaded: TaskState | None, fresh: bool) -> None:
        if loaded is not None and not (fresh and loaded.status.terminal):
            self._adopt(loaded)
            self.detector.restore_state({"seen": loaded.seen, "since": loaded.comments_since})
        elif loaded is not None:
            # Handed back after it finished: a new run that continues the previous one's work.
            self.store.archive_run(self.key, loaded.run)
            self._adopt(
                TaskState(
                    key=str(self.key),
                    created_at=now_iso(clock=self.deps.clock),
                    run=loaded.run + 1,
                    earlier_usage=loaded.earlier_usage.plus(loaded.usage),
                    next_seq=loaded.next_seq,
                    branch=loaded.branch,
                    branch_repo=loaded.branch_repo,
                    branch_kind=loaded.branch_kind,
                    change_request_url=loaded.change_request_url,
                    previous_summary=loaded.final_answer or loaded.reason,
                )
            )

    def _settle(self, owed_post: bool) -> Outcome:
        """A finished task: make owed labels match, nothing else. With nothing owed, the job
        was planned before the task finished (here or on another daemon): nothing to do."""
        if self.state.labels_applied != self.state.status:
            self.life.labels = self.forge.get_thread(self.key).labels
            self.life.sync_labels()
        elif not owed_post:
            log.info("job_stale", status=self.state.status.value, run=self.state.run)
            return Outcome.NOTHING
        return Outcome.SETTLED

    def _adopt(self, state: TaskState) -> None:
        self.life.adopt(state)
        self._workspace = None

    def _initialize(self, thread: Thread) -> None:
        continuing = self.state.branch if self.state.branch_repo is None else None
        self.state.base_sha, self.state.base_branch = pin(
            self.forge, thread, continuing, outside=self._outside(thread)
        )
        self.life.save()
        existing = self.detector.initialize()
        talk = split_commands(existing).talk  # old commands are history, not orders
        workspace = self.workspace()
        trusted = author_trusted(self.forge, thread, self.detector.trust)
        system = self._system_prompt(workspace, thread, trusted)
        counter = self.deps.counter
        tools_tokens = counter.tools([s.openai() for s in self._toolbox.specs()])
        fixed = counter.count(system) + tools_tokens
        opening = initial_context(
            thread,
            self.detector.deliverable(talk),
            workspace,
            counter,
            opening_budget(self.turn.budget(), fixed),
            previous=self.state.previous_summary,
            base=target_workspace(self.forge, thread, self.state.base_sha, self.settings),
            author_trusted=trusted,
            left_out_tools=self._mcp.left_out if self._mcp is not None else (),
        )
        log.info("context_plan", **opening.plan.log_fields())
        self.conversation.append({"role": "system", "content": system, "kind": "system"})
        self.conversation.append(
            {
                "role": "user",
                "content": opening.text,
                "kind": "initial",
                "comments": [comment_ref(c.comment) for c in existing],
                "legend": {str(n): cid for n, cid in opening.legend.items()},
                "internal_texts": self.detector.internal_texts(self.detector.deliverable(talk)),
            }
        )
        self.detector.mark_seen(existing)
        self.life.start()
        log.info("task_started", run=self.state.run, comments=len(existing))

    def _system_prompt(self, workspace: Workspace, thread: Thread, trusted: bool) -> str:
        assert self.state.base_sha is not None
        rules = repository_instructions(
            self.forge,
            thread,
            self.state.base_sha,
            workspace,
            trusted,
            self.deps.counter,
            self.turn.budget() // 8,
        )
        return load_prompt("system.md").format(
            bot_login=self.deps.identity.login,
            task_ref=str(self.key),
            repo=self.key.repo,
            repo_rules=rules or "(none)",
        )

    # -- the loop -----------------------------------------------------------------------------

    def _loop(self) -> Outcome:
        end = self.turn.resume()
        while end.halt is None:
            check = self.safe.check()  # before every model call, and before the answer goes out
            if check.halt is not None:
                return check.halt
            if end.final is None or check.delivered:
                end = self.turn.take()  # a comment before the final answer: another turn
                continue
            assert self.safe.thread is not None
            answer = end.final
            report = self._checks()
            if report.again:  # failing checks go back to the model for a bounded few turns
                end = self.turn.take()
                continue
            if report.ran:  # checks take minutes: a pause, stop or close meanwhile wins
                check = self.safe.check()
                if check.halt is not None:
                    return check.halt
                if check.delivered:
                    end = self.turn.take()
                    continue
            return finish(
                self.forge,
                self.safe.thread,
                self.life,
                self.workspace(),
                self.settings.agent,
                answer,
                outside=self._outside(self.safe.thread),
                report=report.text,
                what_i_did=self._what_i_did if self.settings.agent.report else None,
                page=self._page(),
            )
        return end.halt

    def _what_i_did(self) -> str:
        """The final comment's account of this run, from the store (as `bot show` sees it).
        Each name in it is shown without internal-note text or secrets: the configured ones,
        those the adapters learned (installation tokens), and anything shaped like a token."""
        timeline = build_timeline(self.store, self.key, price=self.settings.llm.price)
        notes = self.poster.internal.current()
        configured = Redactor(self.settings.secrets())

        def public(text: str) -> str:
            return redactor().scrub(configured.scrub(withhold(text, notes)))

        return what_i_did(timeline, self.state.changes, self.deps.clock.now(), public)

    def _page(self) -> str | None:
        """The task page's address, where `ui.public_url` says people reach it."""
        ui = self.settings.ui
        if ui is None or ui.public_url is None:
            return None
        return page_url(ui.public_url, self.key)

    def _author_trusted(self, thread: Thread) -> bool:
        return author_trusted(self.forge, thread, self.detector.trust)

    def _outside(self, thread: Thread) -> bool:
        """Whether the request's head may carry commits by people without write access."""
        return head_from_outside(thread, self._author_trusted(thread))

    def _checks(self) -> CheckRound:
        """Run the repository's checks on the final changeset; say what they did."""
        if not self.state.changes:
            return CheckRound("")
        session = self._commands()
        if session is None:
            self.events.checks(None)
            return CheckRound("\n\n" + checks_markdown(None, enabled=False))
        reports = session.run_checks()
        self.events.checks(reports)
        text = "\n\n" + checks_markdown(reports, enabled=True)
        if failing(reports) and self.state.check_rounds < self.settings.jail.max_fix_turns:
            self.state.check_rounds += 1
            request = fix_request(reports, trusted=session.head_trusted)
            self.conversation.append({"role": "user", "content": request, "kind": "checks"})
            self.life.save()
            return CheckRound(text, again=True)
        return CheckRound(text, ran=True)
