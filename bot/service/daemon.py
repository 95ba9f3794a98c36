"""The daemon: scheduler, worker pool, shutdown. No per-task logic lives here."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import threading
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

from bot.context.tokens import TokenCounter
from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.config import Settings
from bot.core.log import get_logger
from bot.core.metrics import Metrics
from bot.forge.base import RateLimits
from bot.forge.errors import AuthError, ForgeError
from bot.forge.factory import Source
from bot.forge.inbox import ThreadTodos
from bot.forge.mentions import calls_bot
from bot.jail import Jail
from bot.llm.base import LLMClient
from bot.model.state import Status, TaskState
from bot.model.thread import Platform, TaskKey, TaskSummary
from bot.model.trust import Identity, Trust
from bot.repo.snapshot import pin_scope
from bot.service.app_refresh import AppRefresh
from bot.service.discovery import discover
from bot.service.dispatch import Job, plan_jobs
from bot.service.health import HeartbeatWriter
from bot.service.jobqueue import JobQueue
from bot.service.notify import Notifier
from bot.service.rejections import Rejections
from bot.store.base import Store
from bot.store.errors import DatabaseError, LeaseLost, StateError, TaskBusy
from bot.store.factory import daemon_name
from bot.store.task_files import DaemonLock
from bot.task.controls import Command, commands_since_finish
from bot.task.mcp_run import McpLauncher
from bot.task.runner import Deps, Outcome, TaskRunner

log = get_logger(__name__)
TAKE_SECONDS = 2.0  # how often a daemon sharing a store looks for queued jobs


@dataclass
class _Worker:
    source: Source  # replaced (not changed) when an app's installation gains or loses repos
    runner: TaskRunner
    job: str = ""  # its poll job in `run_forever`

    @property
    def role(self) -> str:
        """The discovery role of this source, the same in every daemon with this config (an
        app's installation by its id: its repositories change with refreshes)."""
        if self.source.installation is not None:
            return f"discover:{self.source.forge.platform.value}:app:{self.source.installation}"
        repos = ",".join(sorted(repo.lower() for repo in self.source.repos))
        digest = hashlib.sha256(repos.encode()).hexdigest()[:12]
        return f"discover:{self.source.forge.platform.value}:{digest}"


class Daemon:
    def __init__(
        self,
        settings: Settings,
        sources: list[Source],
        llm: LLMClient,
        stop: threading.Event | None = None,
        metrics: Metrics | None = None,
        notifier: Notifier | None = None,
        *,
        store: Store,
        counter: TokenCounter,
        jail: Jail | None,
        app_refresh: AppRefresh | None = None,
        clock: Clock = SYSTEM_CLOCK,
        mcp: McpLauncher | None = None,
    ) -> None:
        """Everything outside is given (`bot.app.build_daemon` builds it from the config);
        `jail` is None unless `jail.enabled`, `mcp` unless MCP servers are configured."""
        self.settings = settings
        self.clock = clock  # handed to every part that reads the time
        self.sources = sources
        self.llm = llm
        self.stop = stop or threading.Event()
        self.metrics = metrics or Metrics()
        self.notifier = notifier or Notifier(None)
        self.heartbeat = HeartbeatWriter(settings.state_dir, clock.time)
        self._last_poll = "never"
        self.store = store
        self.index = self.store.index()  # a poll reads only the tasks that changed
        self.name = daemon_name(settings)
        self._local_lock = DaemonLock(settings.state_dir)
        self._pool = ThreadPoolExecutor(settings.max_concurrent_tasks, thread_name_prefix="task")
        self._checks = ThreadPoolExecutor(1, thread_name_prefix="thread-check")  # webhooks
        self._in_flight: dict[str, Future[Outcome]] = {}
        self._guard = threading.Lock()
        self._workers: list[_Worker] = []
        self._left_alone: set[str] = set()  # tasks of unconfigured repositories, logged once
        self.rejections = Rejections(self.heartbeat)  # tokens the forges refused
        self.counter = counter
        self.jail = jail
        self.mcp = mcp
        if self.jail is not None:  # which bounds hold here (README, "Running commands")
            log.info("jail_limits", **self.jail.host_limits())
        self.app_refresh = app_refresh  # None: no GitHub App, or never refreshed
        self._job_ids = itertools.count()
        # Mention To-Do items of a thread a webhook named, to mark done when its run ends.
        self._todos_after_run: dict[str, tuple[_Worker, list[str]]] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def initialize(self) -> None:
        """Take the store and learn who we are on each forge (raises on failure)."""
        self.store.open(self.name)
        if self.store.shared:
            # The local part (heartbeat, snapshot cache) is still one daemon's: the files store
            # holds this lock itself.
            self._local_lock.acquire()
        for source in self.sources:
            self._workers.append(self._new_worker(source))

    def _new_worker(self, source: Source) -> _Worker:
        me = source.forge.whoami()
        log.info("forge_identity", platform=source.forge.platform.value, login=me.login)
        deps = Deps(
            forge=source.forge,
            store=self.store,
            llm=self.llm,
            settings=self.settings,
            identity=Identity.from_settings(me.login, self.settings.access),
            counter=self.counter,
            stop=self.stop,
            metrics=self.metrics,
            jail=self.jail,
            clock=self.clock,
            mcp=self.mcp,
        )
        return _Worker(source, TaskRunner(deps))

    def run_once(self) -> None:
        """One discovery cycle; every task found runs until it ends, pauses or is interrupted."""
        for worker in self._workers:
            self.poll(worker, lead=False)
        self._drain()
        while self.store.shared and self.take():  # queued by others meanwhile, or left over
            self._drain()

    def run_forever(self) -> None:
        queue = JobQueue(self.clock)
        for worker in self._workers:
            self._schedule_poll(queue, worker)
        app = self.settings.github.app if self.settings.github else None
        if app is not None and app.refresh_minutes > 0:
            # Not at once: `initialize` has just read the installations.
            refresh = partial(self.refresh_app, queue)
            queue.every(app.refresh_minutes * 60, refresh, "refresh-app", now=False)
        if self.store.shared:  # jobs discovered by another daemon, or freed by a dead one
            queue.every(TAKE_SECONDS, self.take, "take")
        queue.start()
        self.heartbeat.write()
        log.info(
            "daemon_started",
            sources=len(self._workers),
            poll_interval=self.settings.poll_interval_seconds,
        )
        self.notifier.ready(self._status())
        # The main loop only proves liveness: the watchdog ping and the status line.
        tick = min(self.notifier.watchdog_interval or 5.0, 5.0)
        try:
            while not self.stop.wait(tick):
                self.notifier.watchdog()
                self.notifier.status(self._status())
        finally:
            self.notifier.stopping()
            log.info("daemon_stopping", running=len(self._in_flight))
            queue.shutdown()
            self._drain()

    def _schedule_poll(self, queue: JobQueue, worker: _Worker) -> None:
        worker.job = f"poll-{worker.source.forge.platform.value}-{next(self._job_ids)}"
        queue.every(self.settings.poll_interval_seconds, partial(self.poll, worker), worker.job)

    def refresh_app(self, queue: JobQueue | None = None) -> None:
        """Read the GitHub App's installations and repositories again and apply the difference:
        a new repository is polled from the next poll, a new installation gets a worker (and a
        poll job in `queue`), a removed one is no longer polled and its saved tasks are left
        alone. On any error the previous set stays."""
        if self.stop.is_set() or self.app_refresh is None:
            return
        changes = self.app_refresh.read([worker.source for worker in self._workers])
        if changes is None:
            return
        by_source = {id(worker.source): worker for worker in self._workers}
        workers: list[_Worker] = []
        for before, now in changes.kept:
            worker = by_source[id(before)]
            worker.source = now
            workers.append(worker)
        for before in changes.gone:
            if queue is not None:
                queue.cancel(by_source[id(before)].job)
        for source in changes.new:
            worker = self._new_worker(source)
            workers.append(worker)
            if queue is not None:
                self._schedule_poll(queue, worker)
        with self._guard:
            self._workers = workers  # one assignment: readers see the old list or the new
        self._note_unwatched(workers)

    def _note_unwatched(self, workers: list[_Worker]) -> None:
        """Running or paused tasks of repositories no installation watches any more: left
        alone and logged once, as `plan_jobs` does for repositories removed from the config."""
        running = set(self.in_flight())
        unwatched = [
            state
            for state in self.index.active_states(self.index.refresh())
            if state.task_key().platform is Platform.GITHUB
            and str(state.task_key()) not in running
            and not any(worker.source.owns(state.task_key()) for worker in workers)
        ]
        plan_jobs(
            [],
            self.store,
            unwatched,
            self.settings.labels,
            Platform.GITHUB,
            repos=(),
            noted=self._left_alone,
            now=self.clock.now(),
        )

    def _status(self) -> str:
        return f"{len(self.in_flight())} tasks running; last poll {self._last_poll}"

    def close(self) -> None:
        self._checks.shutdown(wait=True, cancel_futures=True)
        self._pool.shutdown(wait=True)
        self.store.close()
        self._local_lock.release()

    # -- work ---------------------------------------------------------------------------------

    def poll(self, worker: _Worker, lead: bool = True) -> None:
        """Discover the source's threads and plan their jobs; with several daemons on one
        store, only the one holding the source's discovery role does (`lead`)."""
        if self.stop.is_set():
            return
        if lead and self.store.shared and not self.store.lead(worker.role, self._lead_seconds):
            self.take()  # another daemon discovers this source now: alive, and taking work
            self._count_tasks()
            self.heartbeat.poll(True, None, running=len(self.in_flight()))
            return
        platform = worker.source.forge.platform
        view = self.index.refresh()  # once per poll: for the plan and the metrics
        saved = self.index.active_states(view)
        self.rejections.new_cycle(platform.value)
        try:
            result = discover(worker.source, self.store)
        except AuthError as exc:
            # Nothing on this source can work: one line, no traceback, no task touched.
            self._record_poll(worker, view.counts(), ok=False, error=f"AuthError: {exc}")
            self.rejections.rejected(platform.value, exc)
            return
        except Exception as exc:
            self._record_poll(worker, view.counts(), ok=False, error=f"{type(exc).__name__}: {exc}")
            raise  # the job queue's error handler logs it with its traceback
        self.rejections.accepted(platform.value)  # the heartbeat is written with the poll
        failed = ", ".join(result.failed_repos)
        self._record_poll(
            worker, view.counts(), ok=not failed, error=f"failed: {failed}" if failed else None
        )
        jobs = plan_jobs(
            result.tasks,
            self.store,
            [state for state in saved if worker.source.owns(state.task_key())],
            self.settings.labels,
            platform,
            partial(self._since_finish, worker),
            bot_login=worker.runner.deps.identity.login,
            repos=worker.source.repos,
            noted=self._left_alone,
            now=self.clock.now(),
        )
        self._hand_out(worker, jobs)
        # Only now are the inbox items this poll read marked read/done (and its cursor moved):
        # those whose task's start is recorded, or that needed none.
        result.settle(partial(self._recorded, {job.key for job in jobs}))

    def _recorded(self, planned: set[TaskKey], key: TaskKey) -> bool:
        """May the inbox item that found `key` be settled? Yes when no job was planned for it
        (nothing to start: a reader's mention, a task running or finished) or its task's state
        is saved. A job handed out is not enough: the files backend's jobs live in this process
        only, and a postgres job leaves the queue when a daemon takes it."""
        if key not in planned:
            return True
        try:
            return self.store.load(key) is not None
        except StateError:
            return False

    def request_check(self, key: TaskKey) -> None:
        """Queue `check_thread` (called from the webhook listener: answer fast, work later)."""
        if not self.stop.is_set():
            self._checks.submit(self.check_thread, key)

    def check_thread(self, key: TaskKey) -> bool:
        """One thread, now (a webhook named it): the same plan as a poll, for this key only.

        False when no configured source watches the thread's repository. Errors are logged;
        the next poll sweeps whatever this missed.
        """
        worker = self._worker_for(key)
        if worker is None or self.stop.is_set():
            return False
        # Listed first: a To-Do item made after the thread is read below is the sweep's.
        todos = self._mention_todos(worker, key)
        try:
            thread = worker.source.forge.get_thread(key)
        except ForgeError as exc:
            log.warning("thread_check_failed", task=str(key), error=str(exc))
            return True
        try:
            saved = self.store.load(key)
        except StateError as exc:
            log.error("state_unreadable", task=str(key), error=str(exc))
            return True
        summary = TaskSummary(
            key,
            thread.title,
            thread.labels,
            thread.assignees,
            thread.updated_at,
            is_open=thread.state in ("open", "opened"),
            mentioned=saved is None and self._called_by_writer(worker, key),
        )
        jobs = plan_jobs(
            [summary],
            self.store,
            [saved] if saved is not None else [],
            self.settings.labels,
            key.platform,
            partial(self._since_finish, worker),
            bot_login=worker.runner.deps.identity.login,
            repos=worker.source.repos,
            noted=self._left_alone,
            now=self.clock.now(),
        )
        log.info("thread_checked", task=str(key), jobs=len(jobs))
        self._hand_out(worker, jobs)
        if todos:
            if self._recorded({job.key for job in jobs}, key):
                self._todos_done(worker, todos)
            else:  # settled when this daemon's run of the task ends (else by the sweep)
                with self._guard:
                    self._todos_after_run[str(key)] = (worker, todos)
        return True

    def _mention_todos(self, worker: _Worker, key: TaskKey) -> list[str]:
        """The thread's pending mention To-Do items (GitLab), to mark done once handled."""
        forge = worker.source.forge
        if not isinstance(forge, ThreadTodos):
            return []
        try:
            return forge.mention_todos(key)
        except ForgeError as exc:
            log.warning("thread_check_failed", task=str(key), error=str(exc))
            return []

    def _todos_done(self, worker: _Worker, todos: list[str]) -> None:
        forge = worker.source.forge
        if not isinstance(forge, ThreadTodos):
            return
        try:
            forge.todos_done(todos)
        except ForgeError as exc:  # pending still: the sweep marks them done
            log.warning("mention_settle_failed", platform="gitlab", error=str(exc))

    def _hand_out(self, worker: _Worker, jobs: list[Job]) -> None:
        """Run the jobs here, or (several daemons) queue them for whichever daemon is free."""
        if not self.store.shared:
            for job in jobs:
                self._submit(worker, job)
            return
        self.store.enqueue(jobs)
        self.take()

    def take(self) -> int:
        """Take queued jobs (several daemons) as far as this daemon has free workers."""
        with self._guard:
            free = self.settings.max_concurrent_tasks - len(self._in_flight)
        if free <= 0 or self.stop.is_set():
            return 0
        try:
            taken = self.store.take(free)
        except StateError as exc:  # the database away (its outage is logged once by the store)
            log.warning("take_failed", error=str(exc))
            return 0  # tried again within seconds
        for queued in taken:
            worker = self._worker_for(queued.key)
            if worker is None:  # a repository this daemon is not configured for
                log.warning("job_not_ours", task=str(queued.key))
                continue
            self._submit(worker, queued)
        return len(taken)

    @property
    def auth_error(self) -> str | None:
        """The last token rejection, for `bot run --once`'s exit status."""
        return self.rejections.last

    @property
    def _lead_seconds(self) -> float:
        # Renewed at every poll; a dead leader's role passes on after two missed polls.
        return 2.0 * self.settings.poll_interval_seconds

    def _called_by_writer(self, worker: _Worker, key: TaskKey) -> bool:
        """A writer's `@bot` or `/bot` in the thread: the delivery may be that comment (the only
        way an app, which cannot read notifications, hears a mention)."""
        me = worker.runner.deps.identity.login
        trust = Trust.from_settings(self.settings.access)
        try:
            comments = worker.source.forge.list_comments(key)
        except ForgeError as exc:
            log.warning("thread_check_failed", task=str(key), error=str(exc))
            return False
        return any(
            calls_bot(c.body, me) and trust.trusted(c)
            for c in comments
            if not (c.author_is_bot or c.is_system)
        )

    def _worker_for(self, key: TaskKey) -> _Worker | None:
        for worker in self._workers:
            watched = {repo.lower() for repo in worker.source.repos}
            if worker.source.forge.platform is key.platform and key.repo.lower() in watched:
                return worker
        return None

    def _since_finish(self, worker: _Worker, key: TaskKey, state: TaskState) -> list[Command]:
        deps = worker.runner.deps
        trust = Trust.from_settings(self.settings.access)
        try:
            return commands_since_finish(worker.source.forge, key, state, deps.identity, trust)
        except ForgeError as exc:  # not handed back this poll: the next one asks again
            log.warning("handback_check_failed", task=str(key), error=str(exc))
            return []

    def _record_poll(
        self, worker: _Worker, counts: Counter[str], ok: bool, error: str | None
    ) -> None:
        platform = worker.source.forge.platform.value
        self._last_poll = self.clock.now().strftime("%H:%M:%SZ") + ("" if ok else " (failed)")
        self.metrics.polls.labels(platform, "ok" if ok else "failed").inc()
        forge = worker.source.forge
        limits = forge.rate_limits() if isinstance(forge, RateLimits) else {}
        for bucket, remaining in limits.items():
            self.metrics.rate_limit_remaining.labels(platform, bucket).set(remaining)
        self._count_tasks(counts)
        self.heartbeat.poll(ok, error, running=len(self.in_flight()))

    def _count_tasks(self, counts: Counter[str] | None = None) -> None:
        counts = self.index.refresh().counts() if counts is None else counts
        for status in Status:
            self.metrics.tasks.labels(status.value).set(counts.get(status.value, 0))

    def _submit(self, worker: _Worker, job: Job) -> None:
        name = str(job.key)
        with self._guard:
            if name in self._in_flight or self.stop.is_set():
                return  # one worker per task at a time, ever
            future = self._pool.submit(self._work, worker, job)
            self._in_flight[name] = future
        future.add_done_callback(partial(self._done, name))

    def _done(self, name: str, _future: Future[Outcome]) -> None:
        with self._guard:
            self._in_flight.pop(name, None)
            todos = self._todos_after_run.pop(name, None)
        if todos is not None and not self.stop.is_set():
            with contextlib.suppress(RuntimeError):  # closing: the sweep marks them done
                self._checks.submit(self._todos_done, *todos)
        if self.store.shared:  # a worker is free: the next queued job now, not at the tick
            self.take()

    def _work(self, worker: _Worker, job: Job) -> Outcome:
        try:
            with pin_scope():  # the task's snapshots may be evicted once the run is over
                outcome = worker.runner.run(job.key, fresh=job.fresh)
            self._count_tasks()
            return outcome
        except TaskBusy:
            # Several daemons: another one claimed it between the queue and the lease.
            log.info("task_busy", task=str(job.key))
            return Outcome.INTERRUPTED
        except LeaseLost:
            log.warning("lease_lost", task=str(job.key))
            return Outcome.INTERRUPTED
        except DatabaseError as exc:
            # The shared store is away (the pool logs the outage once, `database_unavailable`):
            # the lease runs out and any daemon resumes the task from its last saved state
            # once the database is back.
            log.warning("task_interrupted", task=str(job.key), reason="database", error=str(exc))
            return Outcome.INTERRUPTED
        except AuthError as exc:
            self.rejections.rejected(worker.source.forge.platform.value, exc, task=str(job.key))
            return Outcome.INTERRUPTED
        except Exception as exc:
            # One handler for the unexpected: logged with its traceback, the task resumes
            # next cycle from its saved state, the daemon keeps working.
            log.exception("task_crashed", task=str(job.key), error=type(exc).__name__)
            return Outcome.INTERRUPTED

    def _drain(self) -> None:
        while True:
            with self._guard:
                pending = list(self._in_flight.values())
            if not pending:
                return
            for future in pending:
                future.result()
            with self._guard:
                for name in [n for n, f in self._in_flight.items() if f.done()]:
                    del self._in_flight[name]

    def in_flight(self) -> list[str]:
        with self._guard:
            return sorted(self._in_flight)
