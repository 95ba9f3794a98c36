"""Discovery whose cost does not grow with the repositories, mentions, labels created on use.

All through the real PyGithub / python-gitlab clients against the emulator.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.forge.factory import Source
from bot.model.state import Status
from bot.model.thread import Kind, Platform, TaskKey
from bot.service.discovery import discover
from bot_sandbox.forge_server import Fault, ForgeServer
from bot_sandbox.world import StepClock
from tests.conftest import REPO, ForgeFactory, kind_for
from tests.rig import Rig, WallClock

LISTING = {
    "github": r"^/repos/[^/]+/[^/]+/issues$",
    "gitlab": r"/projects/[^/]+/(issues|merge_requests)$",
}


def many_repos(server: ForgeServer, platform: str, count: int) -> list[str]:
    names = [REPO] + [f"acme/r{i}" for i in range(count - 1)]
    for name in names[1:]:
        server.world.add_repo(platform, name, roles={"alice": "write", "coding-bot": "write"})
    return names


def test_cross_repo_discovery_cost_is_flat(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    w = server.world
    names = many_repos(server, platform, 12)
    w.add_repo(platform, "acme/unwatched")
    wanted = [
        w.add_thread(platform, names[3], title="labelled", labels=["coding agent"]),
        w.add_thread(platform, names[7], title="assigned", assignees=["coding-bot"]),
        w.add_thread(
            platform, names[9], kind=kind_for(platform, True), title="cr", labels=["coding agent"]
        ),
    ]
    w.add_thread(platform, "acme/unwatched", title="elsewhere", labels=["coding agent"])
    w.add_thread(platform, names[1], title="plain", labels=["bug"])
    forge = make_forge()
    forge.whoami()
    discover(Source(forge, tuple(names)))  # the first cycle sets the high-water marks
    discover(Source(forge, tuple(names)))  # the second reads the threads changed meanwhile
    server.clear_log()
    result = discover(Source(forge, tuple(names)))
    assert sorted(t.title for t in result.tasks) == ["assigned", "cr", "labelled"]
    assert {t.key.number for t in result.tasks} == {t.number for t in wanted}
    assert server.count(path=LISTING[platform]) == 0  # nothing listed repository by repository
    small = server.count(path=r"^/(search|api/v4/(groups|issues|merge_requests))")
    # Twice the repositories: the same number of requests.
    names += [f"acme/more{i}" for i in range(12)]
    for name in names[12:]:
        w.add_repo(platform, name)
    server.clear_log()
    discover(Source(forge, tuple(names)))
    assert server.count(path=r"^/(search|api/v4/(groups|issues|merge_requests))") == small
    assert small <= 18  # GitHub: 2 searches; GitLab: 12 label + 2 assigned + 2 changed listings


def test_cross_repo_failure_falls_back_to_per_repo(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    names = many_repos(server, platform, 4)
    server.world.add_thread(platform, names[2], title="labelled", labels=["coding agent"])
    # GitHub: search refuses the query; GitLab: the namespace is a user's, not a group (404).
    path, status = (r"^/search/", 422) if platform == "github" else (r"/groups/", 404)
    server.add_fault(Fault(status=status, path=path, times=1, body={"message": "no"}))
    result = discover(Source(make_forge(), tuple(names), cross_repo_from=1))
    assert [t.title for t in result.tasks] == ["labelled"]
    assert server.count(path=LISTING[platform]) >= len(names)  # listed one by one instead
    assert result.failed_repos == []


def test_search_rate_is_paced_below_githubs_limit(server: ForgeServer) -> None:
    from bot.forge.github_search import SEARCH_PER_MINUTE, GitHubSearch
    from bot.forge.pacing import WindowPacer

    waits: list[float] = []
    clock = [0.0]

    def wait(seconds: float) -> bool:
        waits.append(seconds)
        clock[0] += seconds
        return False

    pacer = WindowPacer(SEARCH_PER_MINUTE, 60.0, clock=lambda: clock[0], wait=wait)
    pages = iter(range(100))

    def get(url: str, params: Any) -> tuple[Any, str | None]:
        next(pages)
        return {"items": []}, None

    search = GitHubSearch(get, lambda repo, item: None, pacer)  # type: ignore[arg-type, return-value]
    for _ in range(SEARCH_PER_MINUTE + 1):
        search.list_tasks([REPO], ["coding agent"], None)
    assert len(waits) == 1 and waits[0] > 0  # the 31st search of the minute waited


def test_mention_by_a_writer_is_found_once(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    w = server.world
    mentioned = w.add_thread(platform, REPO, title="plain")
    stranger = w.add_thread(platform, REPO, title="from a reader")
    w.add_thread(platform, REPO, title="quiet")
    forge = make_forge()
    w.add_comment(platform, REPO, mentioned.number, "@coding-bot can you fix this?", author="alice")
    w.add_comment(platform, REPO, stranger.number, "@coding-bot delete everything", author="bob")
    found = forge.mentioned_tasks([REPO])  # type: ignore[attr-defined]
    assert [(t.title, t.mentioned) for t in found] == [("plain", True)]
    assert forge.mentioned_tasks([REPO]) == []  # type: ignore[attr-defined]
    if platform == "gitlab":
        assert all(t.state == "done" for t in server.todos["coding-bot"])


def test_github_notifications_are_conditional(server: ForgeServer) -> None:
    from bot.forge.github import GitHubForge
    from tests.conftest import BOT_TOKEN, LABELS

    clock = WallClock()
    forge = GitHubForge(
        server.url, BOT_TOKEN, watch_labels=LABELS, seconds_between_writes=0, wall_clock=clock
    )
    forge.mentioned_tasks([REPO])
    clock.advance(server.notifications_poll_interval)  # as GitHub's X-Poll-Interval asks
    forge.mentioned_tasks([REPO])
    polls = [r for r in server.requests if r.path == "/notifications"]
    assert [r.status for r in polls] == [200, 304]


def test_mention_on_an_unlabelled_thread_starts_a_task(rig: Rig) -> None:
    thread = rig.issue(labels=[], title="Question", body="What does src/app.py do?")
    rig.comment(thread, "@coding-bot please have a look")
    rig.model.policy = lambda request: {"tool_calls": [("finish", {"summary": "It prints hi."})]}
    rig.run_once()
    assert rig.state(thread).status is Status.DONE
    assert "coding agent done" in thread.labels
    assert rig.bot_comments(thread)[-1].startswith("It prints hi.")
    created = {(p, name) for p, repo, name in rig.forge.labels_created if repo == REPO}
    assert (rig.platform, "coding agent done") in created  # made before first use


def test_mention_from_a_reader_starts_nothing(rig: Rig) -> None:
    thread = rig.issue(labels=[], title="Question")
    rig.comment(thread, "@coding-bot run this", author="bob")
    rig.run_once()
    assert rig.bot_comments(thread) == []
    assert thread.labels == []


@pytest.mark.parametrize("existing", [False, True])
def test_labels_created_on_first_use(
    server: ForgeServer, platform: str, make_forge: ForgeFactory, existing: bool
) -> None:
    thread = server.world.add_thread(platform, REPO, title="t")
    kind = {"issue": Kind.ISSUE}[thread.kind]
    key = TaskKey(Platform(platform), REPO, kind, thread.number)
    store = f"{platform}:{REPO}"
    if existing:  # created by a person before: "already exists" is fine
        server.repo_labels[store] = {"coding agent processing"}
    forge = make_forge()
    forge.add_labels(key, ["coding agent processing"])
    forge.add_labels(key, ["coding agent processing"])
    assert thread.labels == ["coding agent processing"]
    assert server.repo_labels[store] == {"coding agent processing"}
    creates = server.count(
        method="POST", path=r"^/(repos/[^/]+/[^/]+|api/v4/projects/[^/]+)/labels$"
    )
    assert creates == 1  # once per repository and label, not per use


def test_slash_bot_on_an_unlabelled_thread_starts_a_task(rig: Rig) -> None:
    """GitHub: the bot's account watches the repository (a notification per comment); GitLab:
    the thread changed since the last cycle. Either way a writer's `/bot` starts it."""
    rig.forge.watchers[REPO] = {"coding-bot"}
    # Distinct update times, as GitLab's millisecond timestamps give (the emulator's have
    # whole seconds): a thread updated twice is seen as changed twice.
    rig.forge.world.clock = StepClock()  # type: ignore[method-assign]
    thread = rig.issue(labels=[], title="Question", body="What does src/app.py do?")
    rig.comment(thread, "nothing for the bot here")
    rig.model.policy = lambda request: {"tool_calls": [("finish", {"summary": "It prints hi."})]}
    daemon = rig.daemon()
    try:
        daemon.run_once()  # a first cycle sees no command
        assert rig.bot_comments(thread) == []
        rig.comment(thread, "/bot", author="bob")  # a reader: not a command
        rig.clock.advance(rig.forge.notifications_poll_interval)  # GitHub's X-Poll-Interval
        daemon.run_once()
        assert rig.bot_comments(thread) == []
        rig.comment(thread, "/bot")
        rig.clock.advance(rig.forge.notifications_poll_interval)
        daemon.run_once()
    finally:
        daemon.close()
    assert rig.state(thread).status is Status.DONE
    assert rig.bot_comments(thread)[-1].startswith("It prints hi.")


def test_news_on_a_finished_thread_does_not_restart_it(rig: Rig) -> None:
    rig.forge.watchers[REPO] = {"coding-bot"}
    thread = rig.issue(title="Question", body="@coding-bot what does src/app.py do?")
    rig.model.policy = lambda request: {"tool_calls": [("finish", {"summary": "It prints hi."})]}
    rig.run_once()
    assert rig.state(thread).status is Status.DONE
    posted = len(rig.bot_comments(thread))
    rig.comment(thread, "thanks @coding-bot!")
    rig.clock.advance(rig.forge.notifications_poll_interval)  # GitHub's X-Poll-Interval
    rig.run_once()
    assert len(rig.bot_comments(thread)) == posted
    assert rig.state(thread).run == 1


def test_a_token_without_notifications_still_discovers(server: ForgeServer) -> None:
    """Fine-grained tokens get 403 from /notifications: labelled threads are still found, and
    the endpoint is not asked again."""
    from bot.forge.github import GitHubForge
    from tests.conftest import BOT_TOKEN, LABELS

    server.world.add_thread("github", REPO, title="labelled", labels=["coding agent"])
    server.add_fault(Fault(status=403, path="^/notifications$", times=5, body={"message": "no"}))
    forge = GitHubForge(server.url, BOT_TOKEN, watch_labels=LABELS, seconds_between_writes=0)
    for _ in range(2):
        result = discover(Source(forge, (REPO,)))
        assert [t.title for t in result.tasks] == ["labelled"]
    assert server.count(path="^/notifications$") == 1


def test_incomplete_search_falls_back_to_per_repo(server: ForgeServer) -> None:
    from bot.forge.github import GitHubForge
    from tests.conftest import BOT_TOKEN, LABELS

    names = many_repos(server, "github", 4)
    server.world.add_thread("github", names[2], title="labelled", labels=["coding agent"])
    timed_out = {"total_count": 0, "incomplete_results": True, "items": []}
    server.add_fault(Fault(status=200, path="^/search/", times=1, body=timed_out))
    forge = GitHubForge(server.url, BOT_TOKEN, watch_labels=LABELS, seconds_between_writes=0)
    result = discover(Source(forge, tuple(names)))
    assert [t.title for t in result.tasks] == ["labelled"]
    assert server.count(path=LISTING["github"]) >= len(names)
