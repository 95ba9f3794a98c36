"""Discussions: an issuable's threads of notes, and a reply in one."""

from __future__ import annotations

import re

from bot_sandbox.gitlab.lookup import THREAD, project_of, thread_of, visible_notes
from bot_sandbox.gitlab.shapes import NOTE_CHARS, NOTE_TOO_LONG, discussion_json, note_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response, body_text
from bot_sandbox.site import Site
from bot_sandbox.world import SComment


def list_discussions(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    thread = thread_of(repo, m["section"], m["iid"])
    grouped: dict[str, list[SComment]] = {}
    for note in sorted(visible_notes(req, repo, thread), key=lambda n: (n.created_at, n.id)):
        grouped.setdefault(site.world.discussion_of(note), []).append(note)
    items = [discussion_json(req.base_url, thread, notes) for notes in grouped.values()]
    return Response(body=items, paginate=True)


def reply(site: Site, req: Request, m: re.Match[str]) -> Response:
    # "Add note to existing merge request thread" / "... issue thread":
    # POST .../discussions/:discussion_id/notes with `body`.
    repo = project_of(site.world, m)
    thread = thread_of(repo, m["section"], m["iid"])
    first = next(
        (n for n in thread.comments if site.world.discussion_of(n) == m["discussion"]), None
    )
    if first is None:
        raise HttpError(404, "404 Discussion Not Found")
    body = body_text(req, 400, "body is missing", NOTE_CHARS, NOTE_TOO_LONG)
    assert req.user is not None
    note = site.world.reply(
        "gitlab",
        repo.path,
        thread.number,
        first.id,
        body,
        author=req.user.login,
        kind=thread.kind,
    )
    return Response(201, note_json(req.base_url, thread, note))


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", THREAD + "/discussions", list_discussions),
    Endpoint("POST", THREAD + r"/discussions/(?P<discussion>[0-9a-f]+)/notes", reply),
]
