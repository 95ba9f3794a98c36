"""The emulator's inboxes answer as the forges do (GitHub notifications, GitLab To-Do items).

Raw HTTP, so that what is checked is the emulator, not a client's reading of it.
"""

from __future__ import annotations

from email.utils import format_datetime
from typing import Any

import requests

from bot.forge._util import next_link
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.mentions import notify
from tests.conftest import BOT_TOKEN, REPO


def _github(server: ForgeServer, url: str, **headers: str) -> requests.Response:
    if url.startswith("/"):
        url = server.url + url
    headers["Authorization"] = f"token {BOT_TOKEN}"
    return requests.get(url, headers=headers, timeout=5)


def _mentions(server: ForgeServer, platform: str, count: int) -> None:
    for n in range(count):
        thread = server.world.add_thread(platform, REPO, title=f"t{n}", labels=[])
        server.world.add_comment(platform, REPO, thread.number, "@coding-bot hi", author="alice")


def test_notifications_come_newest_first_50_a_page_with_links_on_this_host(
    server: ForgeServer,
) -> None:
    _mentions(server, "github", 60)
    first = _github(server, "/notifications?per_page=100")  # more than GitHub's 50: capped
    assert first.status_code == 200 and len(first.json()) == 50
    following = next_link(first.headers.get("Link"))
    assert following is not None and following.startswith(server.url)
    second = _github(server, following)
    assert len(second.json()) == 10 and next_link(second.headers.get("Link")) is None
    listed = [n["updated_at"] for n in first.json() + second.json()]
    assert listed == sorted(listed, reverse=True)  # newest first
    assert len({n["id"] for n in first.json() + second.json()}) == 60
    assert len(_github(server, "/notifications").json()) == 50  # the default page is 50 too


def test_notifications_poll_interval_last_modified_and_304(server: ForgeServer) -> None:
    _mentions(server, "github", 1)
    server.notifications_poll_interval = 120
    first = _github(server, "/notifications")
    assert first.headers["X-Poll-Interval"] == "120"
    unchanged = _github(
        server, "/notifications", **{"If-Modified-Since": first.headers["Last-Modified"]}
    )
    assert unchanged.status_code == 304
    assert unchanged.headers["X-Poll-Interval"] == "120" and "Last-Modified" in unchanged.headers
    _mentions(server, "github", 1)
    later = _github(
        server, "/notifications", **{"If-Modified-Since": first.headers["Last-Modified"]}
    )
    assert later.status_code == 200 and len(later.json()) == 2


def test_notifications_since_all_and_one_thread_per_subject(server: ForgeServer) -> None:
    repo = server.world.repo("github", REPO)
    thread = server.world.add_thread("github", REPO, title="t", labels=[])
    note = notify(server, "coding-bot", repo, thread, "review_requested", thread.created_at)
    (listed,) = _github(server, "/notifications").json()
    assert listed["reason"] == "review_requested"
    since = listed["updated_at"]
    assert _github(server, f"/notifications?since={since}").json() == []  # "after" the time
    requests.patch(
        f"{server.url}/notifications/threads/{note.id}",
        headers={"Authorization": f"token {BOT_TOKEN}"},
        timeout=5,
    ).raise_for_status()
    assert _github(server, "/notifications").json() == []
    assert len(_github(server, "/notifications?all=true").json()) == 1
    # News on the same issue: the same thread, unread again; a mention changes its reason.
    server.world.add_comment("github", REPO, thread.number, "@coding-bot look", author="alice")
    (again,) = _github(server, f"/notifications?since={since}").json()
    assert again["id"] == listed["id"] and again["reason"] == "mention" and again["unread"]
    assert again["last_read_at"] is not None


def test_todos_are_paginated_as_gitlab_lists_are(server: ForgeServer) -> None:
    _mentions(server, "gitlab", 45)
    headers = {"PRIVATE-TOKEN": BOT_TOKEN}
    first = requests.get(f"{server.url}/api/v4/todos", headers=headers, timeout=5)
    body: list[dict[str, Any]] = first.json()
    assert len(body) == 20 and first.headers["X-Next-Page"] == "2"  # 20 by default
    assert first.headers["X-Total"] == "45" and next_link(first.headers["Link"])
    assert [t["id"] for t in body] == sorted((t["id"] for t in body), reverse=True)
    big = requests.get(f"{server.url}/api/v4/todos?per_page=500", headers=headers, timeout=5)
    assert len(big.json()) == 45 and big.headers["X-Per-Page"] == "100"  # at most 100
    merge_requests = f"{server.url}/api/v4/todos?type=MergeRequest"
    assert requests.get(merge_requests, headers=headers, timeout=5).json() == []  # all issues


def test_an_http_date_in_the_same_second_still_moves_the_list_on(server: ForgeServer) -> None:
    _mentions(server, "github", 1)
    first = _github(server, "/notifications")
    _mentions(server, "github", 1)  # within the same second as the Last-Modified sent
    later = _github(
        server, "/notifications", **{"If-Modified-Since": first.headers["Last-Modified"]}
    )
    assert later.status_code == 200
    newest = max(server.notifications["coding-bot"], key=lambda n: n.updated_at).updated_at
    assert later.headers["Last-Modified"] == format_datetime(newest, usegmt=True)
