"""Both adapters, driven through the real PyGithub / python-gitlab clients over HTTP."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import structlog

from bot.forge.errors import AuthError, NotFound, RateLimited, TransientError
from bot.forge.github import RESET_MARGIN
from bot.forge.policy import RequestPolicy
from bot.model.thread import Kind, Permission, Platform, TaskKey
from bot_sandbox.forge_server import Fault, ForgeServer
from bot_sandbox.world import StepClock
from tests.conftest import REPO, ForgeFactory, fast_policy, kind_for


def key_for(platform: str, number: int, change_request: bool = False) -> TaskKey:
    if not change_request:
        kind = Kind.ISSUE
    else:
        kind = Kind.PULL if platform == "github" else Kind.MERGE_REQUEST
    return TaskKey(Platform(platform), REPO, kind, number)


def test_identity_comes_from_the_token(make_forge: ForgeFactory) -> None:
    me = make_forge().whoami()
    assert me.login == "coding-bot"
    assert me.id > 0


def test_bad_token_is_an_auth_error(make_forge: ForgeFactory) -> None:
    with pytest.raises(AuthError):
        make_forge(token="ghp_wrongwrongwrongwrongwrong").whoami()


def test_lists_labelled_and_assigned_open_threads(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    w = server.world
    labelled = w.add_thread(platform, REPO, title="labelled", labels=["coding agent"])
    w.add_thread(platform, REPO, title="unrelated", labels=["bug"])
    assigned = w.add_thread(platform, REPO, title="assigned", assignees=["coding-bot"])
    closed = w.add_thread(platform, REPO, title="closed", labels=["coding agent"])
    w.set_state(platform, REPO, closed.number, "closed", kind="issue")
    change = w.add_thread(
        platform,
        REPO,
        kind=kind_for(platform, True),
        title="cr",
        labels=["coding agent processing"],
    )
    tasks = make_forge().list_tasks(REPO)
    titles = {t.title: t for t in tasks}
    assert set(titles) == {"labelled", "assigned", "cr"}
    assert titles["labelled"].key == key_for(platform, labelled.number)
    assert titles["assigned"].key == key_for(platform, assigned.number)
    assert titles["cr"].key == key_for(platform, change.number, change_request=True)


def test_discovery_notices_label_added_and_removed(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    w = server.world
    thread = w.add_thread(platform, REPO, title="later")
    forge = make_forge()
    assert forge.list_tasks(REPO) == []
    w.set_labels(platform, REPO, thread.number, ["coding agent"], kind="issue")
    assert [t.title for t in forge.list_tasks(REPO)] == ["later"]
    w.set_labels(platform, REPO, thread.number, [], kind="issue")
    assert forge.list_tasks(REPO) == []


def test_all_comments_past_one_hundred(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    w = server.world
    thread = w.add_thread(platform, REPO, labels=["coding agent"])
    for i in range(250):
        w.add_comment(platform, REPO, thread.number, f"comment {i}", author="alice", kind="issue")
    comments = make_forge().list_comments(key_for(platform, thread.number))
    assert [c.body for c in comments] == [f"comment {i}" for i in range(250)]
    assert len({c.id for c in comments}) == 250
    assert server.count(platform, "GET", r"/(comments|notes)$") >= 3  # really paginated


@pytest.mark.parametrize("platform", ["gitlab"])  # system notes exist only there
def test_gitlab_system_notes_are_not_comments(
    server: ForgeServer, make_forge: ForgeFactory, platform: str
) -> None:
    w = server.world
    thread = w.add_thread(platform, REPO)
    w.add_comment(
        platform, REPO, thread.number, "added ~bug label", author="alice", system=True, kind="issue"
    )
    w.add_comment(platform, REPO, thread.number, "a real note", author="alice", kind="issue")
    comments = make_forge().list_comments(key_for(platform, thread.number))
    assert [c.body for c in comments] == ["a real note"]


def test_review_comments_included_on_change_requests(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    w = server.world
    kind = kind_for(platform, True)
    thread = w.add_thread(platform, REPO, kind=kind)
    w.add_comment(platform, REPO, thread.number, "conversation", author="alice", kind=kind)
    w.add_comment(
        platform, REPO, thread.number, "on a line", author="carol", kind=kind, review=True
    )
    comments = make_forge().list_comments(key_for(platform, thread.number, change_request=True))
    assert {(c.body, c.kind) for c in comments} == {
        ("conversation", "conversation"),
        ("on a line", "review"),
    }


def test_comments_carry_author_permission_and_bot_flag(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    w = server.world
    thread = w.add_thread(platform, REPO)
    for author in ("alice", "bob", "carol", "stranger", "github-actions[bot]"):
        w.add_comment(platform, REPO, thread.number, f"by {author}", author=author, kind="issue")
    comments = {c.author: c for c in make_forge().list_comments(key_for(platform, thread.number))}
    assert comments["alice"].permission is Permission.WRITE
    assert comments["carol"].permission is Permission.MAINTAIN
    assert not comments["bob"].permission.can_write
    assert not comments["stranger"].permission.can_write
    assert comments["github-actions[bot]"].author_is_bot


def test_since_returns_new_and_edited_comments(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    w = server.world
    thread = w.add_thread(platform, REPO)
    old = w.add_comment(platform, REPO, thread.number, "old", author="alice", kind="issue")
    forge = make_forge()
    first = forge.list_comments(key_for(platform, thread.number))
    later = first[-1].updated_at + timedelta(seconds=1)
    server.world.clock = lambda: later  # type: ignore[method-assign]
    w.edit_comment(old.id, "old, edited")
    w.add_comment(platform, REPO, thread.number, "new", author="alice", kind="issue")
    changed = forge.list_comments(key_for(platform, thread.number), since=later)
    assert [c.body for c in changed] == ["old, edited", "new"]
    assert changed[0].updated_at > changed[0].created_at


def test_post_edit_and_label_round_trip(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    w = server.world
    thread = w.add_thread(platform, REPO, labels=["coding agent"])
    key = key_for(platform, thread.number)
    forge = make_forge()
    posted = forge.post_comment(key, "working on it")
    edited = forge.edit_comment(key, posted.id, "done")
    assert edited.id == posted.id and edited.author == "coding-bot"
    assert [c.body for c in thread.comments] == ["done"]
    forge.add_labels(key, ["coding agent processing"])
    forge.remove_labels(key, ["coding agent", "not there"])
    assert thread.labels == ["coding agent processing"]
    assert forge.get_thread(key).labels == frozenset({"coding agent processing"})


def test_repository_reads(server: ForgeServer, platform: str, make_forge: ForgeFactory) -> None:
    forge = make_forge()
    assert forge.default_branch(REPO) == "main"
    assert forge.read_file(REPO, "src/app.py", "main") == b"print('hi')\n"
    with pytest.raises(NotFound):
        forge.read_file(REPO, "missing.txt", "main")
    with pytest.raises(NotFound):
        forge.default_branch("acme/nope")


def test_change_request_thread_has_head_and_base(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    thread = server.world.add_thread(
        platform, REPO, kind=kind_for(platform, True), head_ref="fix-1"
    )
    got = make_forge().get_thread(key_for(platform, thread.number, change_request=True))
    assert (got.head_ref, got.base_ref, got.head_repo, got.state) == ("fix-1", "main", REPO, "open")
    assert got.head_sha == thread.head_sha


# -- faults and rate limits -------------------------------------------------------------------


def test_server_errors_are_retried(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    server.add_fault(Fault(status=502, platform=platform, method="GET", times=2))
    assert make_forge().default_branch(REPO) == "main"
    assert server.count(platform, status=502) == 2


def test_resets_and_timeouts_are_retried(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    server.add_fault(Fault(kind="reset", platform=platform, method="GET"))
    server.add_fault(Fault(kind="timeout", platform=platform, method="GET", delay=1.5))
    assert make_forge(timeout=1).default_branch(REPO) == "main"
    assert server.count(platform, status=0) == 2


def test_persistent_server_errors_become_transient_error(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    server.add_fault(Fault(status=503, platform=platform, times=100))
    with pytest.raises(TransientError):
        make_forge().default_branch(REPO)
    assert server.count(platform, status=503) == 4  # max_attempts, then give up


def test_a_failed_post_is_not_repeated(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    # The POST may have landed before the 502: repeating it could duplicate a comment.
    thread = server.world.add_thread(platform, REPO)
    server.add_fault(Fault(status=502, platform=platform, method="POST"))
    with pytest.raises(TransientError):
        make_forge().post_comment(key_for(platform, thread.number), "hello")
    assert server.count(platform, "POST") == 1


class RecordedWaits(threading.Event):
    """The policy's stop event and clock. Every wait really happens (the emulator's limit runs
    on the wall clock) and is recorded, and the policy's clock moves by exactly that much, so
    what is asserted is what the policy decided, not how fast the machine is."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(timeout)
        self.now += timeout
        return super().wait(timeout)


# GitLab has one kind of limit (429); GitHub has primary and secondary ones.
@pytest.mark.parametrize(
    ("platform", "kind"), [("github", "primary"), ("github", "secondary"), ("gitlab", "primary")]
)
def test_rate_limit_waits_as_told_and_sends_nothing_meanwhile(
    server: ForgeServer, platform: str, make_forge: ForgeFactory, kind: str
) -> None:
    waits = RecordedWaits()
    forge = make_forge(policy=RequestPolicy(host=platform, stop=waits, clock=waits.clock))
    forge.whoami()
    server.clear_log()
    server.rate_limit_for(platform, 2.0, kind)
    with structlog.testing.capture_logs() as logs:
        assert forge.default_branch(REPO) == "main"
    # The emulator refuses every request until its advertised reset: one refusal and then a
    # success means nothing was sent before the reset.
    assert [r.status for r in server.requests] == [429 if platform == "gitlab" else 403, 200]
    (told,) = [e["retry_after"] for e in logs if e["event"] == "forge_rate_limited"]
    # Secondary limits say `retry-after: 2`; the others a reset at the next whole second
    # after now + 2, plus the adapter's margin.
    if kind == "secondary":
        assert told == 2.0
    else:
        assert 0 < told <= 3.0 + RESET_MARGIN
    # One wait, as long as the forge told (the log rounds to a tenth), no backoff on top.
    assert len(waits.waits) == 1 and abs(waits.waits[0] - told) <= 0.051


def test_long_rate_limit_is_raised_with_the_wait(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    forge = make_forge(policy=fast_policy(platform, max_inline_wait=1.0))
    forge.whoami()
    server.rate_limit_for(platform, 30.0)
    with pytest.raises(RateLimited) as caught:
        forge.default_branch(REPO)
    assert 29.0 <= caught.value.retry_after <= 32.0
    before = server.count(platform)
    with pytest.raises(RateLimited):
        forge.default_branch(REPO)  # the gate is closed: refused without a request
    assert server.count(platform) == before


# -- polling cost -----------------------------------------------------------------------------


def test_idle_poll_cycle_costs_no_rate_limit_on_github(
    server: ForgeServer, make_forge: ForgeFactory, platform: str
) -> None:
    w = server.world
    for i in range(3):
        w.add_thread(platform, REPO, title=f"t{i}", labels=["coding agent"])
    forge = make_forge()
    forge.list_tasks(REPO)
    server.clear_log()
    forge.list_tasks(REPO)
    forge.list_tasks(REPO)
    if platform == "github":
        # Six watched labels and the assignee query, each answered 304 (free).
        assert server.count("github") == 14
        assert server.count("github", status=304) == 14
    else:
        # One `updated_after` query per kind (issues, merge requests) per cycle.
        assert server.count("gitlab") == 4
        assert server.count("gitlab", path=r"/(issues|merge_requests)$") == 4


def test_unchanged_comment_check_is_one_request(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    w = server.world
    w.clock = StepClock()  # type: ignore[method-assign]
    thread = w.add_thread(platform, REPO)
    for i in range(1000):
        w.add_comment(platform, REPO, thread.number, f"c{i}", author="alice", kind="issue")
    forge = make_forge()
    key = key_for(platform, thread.number)
    comments = forge.list_comments(key)
    newest = comments[-1].updated_at
    for _ in range(2):
        server.clear_log()
        again = forge.list_comments(key, since=newest)
        assert server.count(platform) == 1
        assert [c.body for c in again] == ["c999"]
    if platform == "github":
        assert server.count(platform, status=304) == 1  # the repeat costs no rate limit
