"""Rate-limit buckets kept apart, and searches paced by the server's own window (issue 19,
finding 6); through the real PyGithub and python-gitlab clients against the emulator."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from bot.forge.errors import RateLimited
from bot.forge.github import GitHubForge
from bot.forge.gitlab import GitLabForge
from bot.forge.policy import RequestPolicy
from bot.model.thread import Kind, Platform, TaskKey
from bot_sandbox.forge_server import Fault, ForgeServer
from bot_sandbox.search_limit import SearchLimit
from tests.conftest import BOT_TOKEN, LABELS, REPO, seed_world


class FakeTime(threading.Event):
    """One clock for the emulator and the daemon, as the policy's stop event: a wait moves it
    on at once and is recorded; nothing sleeps."""

    def __init__(self, start: float = 1_800_000_000.25) -> None:
        super().__init__()
        self.now = start
        self.waits: list[float] = []

    def time(self) -> float:
        return self.now

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.waits.append(timeout)
        self.now += timeout
        return False


def github_forge(server: ForgeServer, fake: FakeTime, inline: float = 90.0) -> GitHubForge:
    policy = RequestPolicy(host="github", stop=fake, clock=fake.time, max_inline_wait=inline)
    return GitHubForge(
        server.url,
        BOT_TOKEN,
        watch_labels=LABELS,
        seconds_between_writes=0,
        policy=policy,
        wall_clock=fake.time,
    )


def use_up_searches(server: ForgeServer) -> None:
    """Another client with the same token (a second daemon, a script) spends the minute."""
    auth = {"Authorization": f"token {BOT_TOKEN}"}
    for _ in range(SearchLimit.PER_MINUTE):
        answer = requests.get(f"{server.url}/search/issues", {"q": "is:open"}, headers=auth)
        assert answer.status_code == 200


@pytest.fixture
def fake() -> FakeTime:
    return FakeTime()


@pytest.fixture
def faked(fake: FakeTime) -> Iterator[ForgeServer]:
    """The emulator on the fake clock (its `Date` and its search window)."""
    with ForgeServer(clock=fake.time) as server:
        yield seed_world(server)


def test_a_search_limit_does_not_delay_a_comment_check(faked: ForgeServer, fake: FakeTime) -> None:
    server = faked
    thread = server.world.add_thread("github", REPO, title="t")
    server.world.add_comment("github", REPO, thread.number, "hello")
    key = TaskKey(Platform.GITHUB, REPO, Kind.ISSUE, thread.number)
    forge = github_forge(server, fake, inline=1.0)
    forge.whoami()
    use_up_searches(server)
    with pytest.raises(RateLimited) as limited:
        forge.list_tasks_across([REPO])  # 403, x-ratelimit-resource: search
    assert limited.value.bucket == "search" and limited.value.retry_after > 1.0
    server.clear_log()
    # The core bucket is open: the comment check goes at once (it waited a minute on one gate).
    assert [c.body for c in forge.list_comments(key)] == ["hello"]
    assert fake.waits == []
    assert server.count(path=r"/comments$", status=200) == 1
    assert server.count(path=r"^/search/") == 0
    # The next search waits for the search window's reset, by the server's Date, and is
    # answered.
    forge.list_tasks_across([REPO])
    assert 59.0 < sum(fake.waits) <= 62.5
    assert [r.status for r in server.requests if r.path == "/search/issues"] == [200, 200]


def test_each_bucket_reports_its_own_remaining(faked: ForgeServer, fake: FakeTime) -> None:
    server = faked
    forge = github_forge(server, fake)
    forge.whoami()
    forge.list_tasks_across([REPO])  # two searches: labels, assignment
    limits = forge.rate_limits()
    assert limits["search"] == SearchLimit.PER_MINUTE - 2
    assert limits["core"] == server.rate_limit - server.used(BOT_TOKEN)  # not the search's 28


def test_gitlab_endpoint_limit_holds_only_that_endpoint(
    server: ForgeServer, tmp_path: Path
) -> None:
    """A 429 without `RateLimit-Name` comes from an endpoint's own limiter (archives: 5 a
    minute); the notes are read meanwhile. GitLab's API throttle (named) holds everything."""
    thread = server.world.add_thread("gitlab", REPO, title="t")
    server.world.add_comment("gitlab", REPO, thread.number, "hello", kind="issue")
    key = TaskKey(Platform.GITLAB, REPO, Kind.ISSUE, thread.number)
    fake = FakeTime()
    policy = RequestPolicy(host="gitlab", stop=fake, clock=fake.time, max_inline_wait=1.0)
    forge = GitLabForge(server.url, BOT_TOKEN, watch_labels=LABELS, policy=policy)
    refused = {"message": "This endpoint has been requested too many times. Try again later."}
    server.add_fault(Fault(status=429, path=r"/repository/archive", body=refused))
    sha = server.world.repo("gitlab", REPO).branches["main"]
    with pytest.raises(RateLimited) as limited:
        forge.download_archive(REPO, sha, tmp_path / "archive.tar.gz")
    assert limited.value.bucket is None  # the refused request's own bucket
    assert [c.body for c in forge.list_comments(key)] == ["hello"]
    assert fake.waits == []
    with pytest.raises(RateLimited):  # the archive bucket stays closed, without a request
        forge.download_archive(REPO, sha, tmp_path / "archive.tar.gz")
    assert server.count(path=r"/repository/archive") == 1
    assert set(forge.rate_limits()) == {"throttle_authenticated_api"}


def test_three_owners_polled_every_5s_for_3_minutes_get_no_search_refused() -> None:
    """The held-out run of issue 19 (30 searches in 20 s, a wait of 60 s by our clock, then a
    403: three runs of three), on one fake clock shared by the emulator and the adapter. Each
    answer takes 50 ms: the server counts a search before the client stamps it."""
    fake = FakeTime()
    with ForgeServer(clock=fake.time) as server:
        seed_world(server)
        repos = [REPO, "beta/app", "gamma/app"]
        for name in repos[1:]:
            server.world.add_repo("github", name, roles={"coding-bot": "write"})
        server.before_response = lambda _record: fake.wait(0.05)
        forge = github_forge(server, fake)
        forge.whoami()
        start = fake.now
        polls = 0
        while fake.now < start + 180:
            began = fake.now
            forge.list_tasks_across(repos)  # 3 owners x (labels, assignment): 6 searches
            polls += 1
            fake.now = max(fake.now, began + 5)  # the next poll 5 s after this one began
        searches = [r for r in server.requests if r.path == "/search/issues"]
    assert [r.status for r in searches if r.status not in (200, 304)] == []
    # Paced, not starved: about the limit, 30 a minute for three minutes.
    assert len(searches) >= 3 * SearchLimit.PER_MINUTE
    assert polls * 6 == len(searches)
