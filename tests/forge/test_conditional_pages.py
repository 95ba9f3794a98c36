"""A list that grows past a full last page is read to its new end, although its first page
answers 304 (issue 19, suspicion (a)); through the real PyGithub client.

GitHub computes a list page's ETag over the page's body, so page 1 of a list whose newest
items land on a later page stays "not modified" when page 2 appears, and the 304 carries no
`Link` header: app-sre/github-mirror#57 ("the response is a 304 and the request does not
include any pagination headers that are supposed to be there as we now have 1 more page of
content") and #290 (no conditional request for a cached page that is full). The emulator
answers so (forge_server `_conditional`: the ETag hashes the body; a 304 has no Link).
"""

from __future__ import annotations

import pytest

from bot.model.thread import Kind, Platform, TaskKey
from bot_sandbox.forge_server import ForgeServer
from tests.conftest import REPO, ForgeFactory

FULL = 100  # the adapter's per_page


@pytest.mark.parametrize("platform", ["github"])  # conditional requests are GitHub's
def test_a_label_event_on_a_new_page_is_seen(server: ForgeServer, make_forge: ForgeFactory) -> None:
    w = server.world
    thread = w.add_thread("github", REPO, title="busy")
    for i in range(FULL // 2):  # 100 events: 50 labels added, 50 removed
        w.set_labels("github", REPO, thread.number, [f"l{i}"])
    assert len(thread.events) == FULL - 1
    w.set_labels("github", REPO, thread.number, [])
    key = TaskKey(Platform.GITHUB, REPO, Kind.ISSUE, thread.number)
    forge = make_forge()
    assert len(forge.control_events(key)) == FULL  # one full page, no next
    w.set_labels("github", REPO, thread.number, ["coding agent paused"])  # event 101, page 2
    server.clear_log()
    events = forge.control_events(key)
    assert [(e.kind, e.name) for e in events[-1:]] == [("labeled", "coding agent paused")]
    pages = [(r.query.get("page", "1"), r.status) for r in server.requests if "/events" in r.path]
    assert pages == [("1", 304), ("2", 200)]  # page 1 still free; page 2 asked for
    server.clear_log()
    assert len(forge.control_events(key)) == FULL + 1
    pages = [(r.query.get("page", "1"), r.status) for r in server.requests if "/events" in r.path]
    assert pages == [("1", 304), ("2", 304)]  # unchanged: nothing spent


@pytest.mark.parametrize("platform", ["github"])
def test_a_list_that_fills_its_page_exactly_costs_one_probe(
    server: ForgeServer, make_forge: ForgeFactory
) -> None:
    """The page after a full last page is asked for once; while it stays empty, it is a 304."""
    w = server.world
    thread = w.add_thread("github", REPO, title="busy")
    for i in range(FULL // 2):
        w.set_labels("github", REPO, thread.number, [f"l{i}"])
    w.set_labels("github", REPO, thread.number, [])
    key = TaskKey(Platform.GITHUB, REPO, Kind.ISSUE, thread.number)
    forge = make_forge()
    forge.control_events(key)
    server.clear_log()
    for _ in range(3):
        assert len(forge.control_events(key)) == FULL
    statuses = [r.status for r in server.requests if "/events" in r.path]
    assert statuses == [304, 200, 304, 304, 304, 304]
