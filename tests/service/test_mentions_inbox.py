"""Mentions are never lost, and a person's inbox is never touched (issue 19, findings 1-4).

The real PyGithub and python-gitlab clients and a real Daemon against the emulator; each daemon
of `Rig.run_once` is a new one over the same store (a restart between cycles), on the files
backend and on PostgreSQL.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.model.state import Status
from bot_sandbox.forge_server import Fault, ForgeServer, RecordedRequest
from bot_sandbox.inbox import STodo
from bot_sandbox.llm_server import LLMServer
from bot_sandbox.mentions import notify
from bot_sandbox.world import SThread
from tests.conftest import REPO
from tests.rig import Rig
from tests.store.helpers import migrated

NOTIFICATION = re.compile(r"^/notifications/threads/(\d+)$")
TODO_DONE = re.compile(r"^/api/v4/todos/(\d+)/mark_as_done$")


@pytest.fixture(params=["files", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _rig(
    server: ForgeServer,
    model: LLMServer,
    platform: str,
    tmp_path: Path,
    backend: str,
    request: pytest.FixtureRequest,
) -> Rig:
    extra = ""
    if backend == "postgres":
        extra = (
            f"store: {{backend: postgres, dsn: '{migrated(request.getfixturevalue('pg_dsn'))}'}}"
        )
    rig = Rig(server, model, platform, tmp_path / "state", extra_config=extra)
    rig.model.policy = lambda _request: {"tool_calls": [("finish", {"summary": "Done."})]}
    return rig


@pytest.fixture
def github(
    server: ForgeServer,
    model: LLMServer,
    tmp_path: Path,
    backend: str,
    request: pytest.FixtureRequest,
) -> Iterator[Rig]:
    rig = _rig(server, model, "github", tmp_path, backend, request)
    yield rig
    rig.close()


@pytest.fixture
def gitlab(
    server: ForgeServer,
    model: LLMServer,
    tmp_path: Path,
    backend: str,
    request: pytest.FixtureRequest,
) -> Iterator[Rig]:
    rig = _rig(server, model, "gitlab", tmp_path, backend, request)
    yield rig
    rig.close()


def mentioned(rig: Rig, count: int, author: str = "alice") -> list[SThread]:
    threads = []
    for n in range(count):
        thread = rig.issue(labels=[], title=f"Question {n}")
        rig.comment(thread, "@coding-bot please have a look", author=author)
        threads.append(thread)
    return threads


class SettleWatch:
    """Every notification marked read and To-Do item marked done, and whether the task its
    thread asked for had a saved state at that moment (the emulator asks the store before it
    answers the request)."""

    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.settled: list[int] = []  # thread numbers
        self.early: list[int] = []  # settled before their task was recorded
        rig.forge.before_response = self.on_request

    def on_request(self, record: RecordedRequest) -> None:
        thread = self._thread(record)
        if thread is None:
            return
        self.settled.append(thread.number)
        if self.rig.store().load(self.rig.key(thread)) is None:
            self.early.append(thread.number)

    def _thread(self, record: RecordedRequest) -> SThread | None:
        server = self.rig.forge
        github, gitlab = NOTIFICATION.match(record.path), TODO_DONE.match(record.path)
        if record.method == "PATCH" and github is not None:
            notes = server.notifications.get("coding-bot", [])
            return next((n.thread for n in notes if n.id == int(github[1])), None)
        if record.method == "POST" and gitlab is not None:
            todos = server.todos.get("coding-bot", [])
            return next((t.thread for t in todos if t.id == int(gitlab[1])), None)
        return None


def unread(server: ForgeServer) -> set[int]:
    return {n.thread.number for n in server.notifications.get("coding-bot", []) if n.unread}


def pending(server: ForgeServer) -> set[int]:
    return {t.thread.number for t in server.todos.get("coding-bot", []) if t.state == "pending"}


def started(rig: Rig, threads: list[SThread]) -> set[int]:
    return {t.number for t in threads if rig.store().load(rig.key(t)) is not None}


def next_poll(rig: Rig) -> None:
    """The wall clock past GitHub's `X-Poll-Interval` (as a daemon running on would wait)."""
    rig.clock.advance(rig.forge.notifications_poll_interval)


# -- GitHub notifications ---------------------------------------------------------------------


def test_sixty_unread_mentions_across_two_pages_all_start_after_a_restart(github: Rig) -> None:
    """A daemon reads its (empty) inbox and stops; 60 mentions arrive meanwhile, more than one
    page of 50; a new Daemon over the same store starts every one of them."""
    watch = SettleWatch(github)
    github.run_once()
    threads = mentioned(github, 60)
    next_poll(github)
    github.run_once()
    assert started(github, threads) == {t.number for t in threads}
    assert all(github.state(t).status is Status.DONE for t in threads)
    assert github.forge.count(method="GET", path="^/notifications$") == 3  # 2 pages + 1 before
    next_poll(github)
    github.run_once()  # what was not settled yet (the runs were still starting) is settled now
    assert unread(github.forge) == set()
    assert sorted(watch.settled) == sorted(t.number for t in threads)  # each once
    assert watch.early == []


def test_a_502_on_the_second_of_three_loses_none(github: Rig) -> None:
    watch = SettleWatch(github)
    first, second, third = mentioned(github, 3)
    # More failures than the request policy retries: the second thread's check fails this cycle.
    fault = Fault(status=502, method="GET", path=f"^/repos/{REPO}/issues/{second.number}$", times=4)
    github.forge.add_fault(fault)
    github.run_once()
    assert fault.times == 0
    assert started(github, [first, second, third]) == {first.number, third.number}
    assert second.number in unread(github.forge)  # left for the next cycle, unread
    next_poll(github)
    github.run_once()
    assert started(github, [second]) == {second.number}
    next_poll(github)
    github.run_once()
    assert unread(github.forge) == set()
    assert watch.early == [] and sorted(watch.settled) == sorted(
        [first.number, second.number, third.number]
    )


def test_only_the_bots_notifications_are_marked_read(github: Rig) -> None:
    """An unwatched repository's mention and a review request on a watched one stay unread,
    never PATCHed; the watched mention is marked read once its task is recorded."""
    server = github.forge
    elsewhere = server.world.add_repo("github", "acme/other", roles={"alice": "write"})
    outside = server.world.add_thread("github", elsewhere.path, title="not watched")
    server.world.add_comment("github", elsewhere.path, outside.number, "@coding-bot hi")
    review = github.issue(kind="pull", labels=[], title="Review me", head_ref="review")
    requested = notify(
        server,
        "coding-bot",
        server.world.repo("github", REPO),
        review,
        "review_requested",
        review.updated_at,
    )
    (wanted,) = mentioned(github, 1)
    for _ in range(2):
        github.run_once()
        next_poll(github)
    assert github.state(wanted).status is Status.DONE
    notes = {n.thread.number: n for n in server.notifications["coding-bot"] if n.repo.path == REPO}
    assert not notes[wanted.number].unread
    assert requested.unread and requested.reason == "review_requested"
    (other,) = [n for n in server.notifications["coding-bot"] if n.repo is elsewhere]
    assert other.unread
    for note in (requested, other):
        assert server.count(method="PATCH", path=f"^/notifications/threads/{note.id}$") == 0
    assert server.count(method="PATCH", path=r"^/notifications/threads/") == 1


def test_x_poll_interval_holds_the_next_notifications_request(github: Rig) -> None:
    """`X-Poll-Interval: 120`: no notifications request before 120 s, also from a restarted
    daemon (the hold is in the store); the labelled threads are listed every cycle meanwhile."""
    server = github.forge
    server.notifications_poll_interval = 120
    github.clock.freeze()  # seconds pass only as the test says
    github.run_once()
    listings = server.count(method="GET", path=f"^/repos/{REPO}/issues$")
    for seconds in (60, 59):  # 119 s after the answer: still held, by each new daemon
        github.clock.advance(seconds)
        github.run_once()
        assert server.count(method="GET", path="^/notifications$") == 1
    assert server.count(method="GET", path=f"^/repos/{REPO}/issues$") == 3 * listings
    github.clock.advance(2)
    github.run_once()
    assert server.count(method="GET", path="^/notifications$") == 2


# -- GitLab To-Do items -----------------------------------------------------------------------


def test_gitlab_a_failure_on_the_second_of_three_todos_loses_none(gitlab: Rig) -> None:
    watch = SettleWatch(gitlab)
    (first,) = mentioned(gitlab, 1)
    (second,) = mentioned(gitlab, 1, author="carol")  # her permission check fails this cycle
    (third,) = mentioned(gitlab, 1)
    carol = gitlab.forge.world.user("carol").id
    fault = Fault(status=502, method="GET", path=f"/members/all/{carol}$", times=4)
    gitlab.forge.add_fault(fault)
    gitlab.run_once()
    assert fault.times == 0
    assert started(gitlab, [first, second, third]) == {first.number, third.number}
    assert second.number in pending(gitlab.forge)
    gitlab.run_once()
    assert started(gitlab, [second]) == {second.number}
    gitlab.run_once()
    assert pending(gitlab.forge) == set()
    assert watch.early == [] and sorted(watch.settled) == sorted(
        [first.number, second.number, third.number]
    )


def test_gitlab_todos_across_pages_all_start(gitlab: Rig) -> None:
    """More To-Do items than one page of 100 (the client's page): every one is read."""
    world = gitlab.forge.world
    threads = mentioned(gitlab, 3)
    repo = world.repo("gitlab", REPO)
    note = threads[0].comments[0]
    # Items of the same threads beyond the first page (a busy account's list).
    for _ in range(110):
        gitlab.forge.todos["coding-bot"].insert(
            0, STodo(world.next_id(), repo, threads[0], "mentioned", note)
        )
    gitlab.run_once()
    assert started(gitlab, threads) == {t.number for t in threads}
    gitlab.run_once()
    assert pending(gitlab.forge) == set()
    assert gitlab.forge.count(method="GET", path="^/api/v4/todos$") >= 2 * 2  # pages, actions


def test_gitlab_only_the_bots_todos_are_marked_done(gitlab: Rig) -> None:
    server = gitlab.forge
    elsewhere = server.world.add_repo("gitlab", "acme/other", roles={"alice": "write"})
    outside = server.world.add_thread("gitlab", elsewhere.path, title="not watched")
    server.world.add_comment("gitlab", elsewhere.path, outside.number, "@coding-bot hi")
    (wanted,) = mentioned(gitlab, 1)
    assigned = STodo(
        server.world.next_id(),
        server.world.repo("gitlab", REPO),
        wanted,
        "assigned",
        wanted.comments[0],
    )
    server.todos["coding-bot"].append(assigned)
    gitlab.run_once()
    gitlab.run_once()
    assert gitlab.state(wanted).status is Status.DONE
    by_repo = {(t.repo.path, t.action): t for t in server.todos["coding-bot"]}
    assert by_repo[(REPO, "directly_addressed")].state == "done"  # "@coding-bot ..." leads
    assert by_repo[(elsewhere.path, "directly_addressed")].state == "pending"
    assert assigned.state == "pending"
    assert server.count(method="POST", path=r"^/api/v4/todos/\d+/mark_as_done$") == 1
