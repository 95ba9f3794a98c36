"""Notes on issues and merge requests: listed, created, edited (quick actions run in both)."""

from __future__ import annotations

import re

from bot_sandbox.gitlab import quick_actions
from bot_sandbox.gitlab.lookup import THREAD, project_of, thread_of, visible_notes
from bot_sandbox.gitlab.shapes import NOTE_CHARS, NOTE_TOO_LONG, note_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response, body_text
from bot_sandbox.site import Site


def list_notes(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    thread = thread_of(repo, m["section"], m["iid"])
    order = req.query.get("order_by", "created_at")
    descending = req.query.get("sort", "desc") == "desc"
    notes = sorted(
        visible_notes(req, repo, thread),
        key=lambda n: (n.updated_at if order == "updated_at" else n.created_at, n.id),
        reverse=descending,
    )
    return Response(body=[note_json(req.base_url, thread, n) for n in notes], paginate=True)


def create_note(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    thread = thread_of(repo, m["section"], m["iid"])
    body = body_text(req, 400, "body is missing", NOTE_CHARS, NOTE_TOO_LONG)
    assert req.user is not None
    head = (req.body or {}).get("merge_request_diff_head_sha")
    done = quick_actions.run(site.world, repo, thread, req.user, body, head)
    if done.commands_only:
        return _commands_only(done)
    note = site.world.add_comment(
        "gitlab", repo.path, thread.number, done.text, author=req.user.login, kind=thread.kind
    )
    return Response(201, note_json(req.base_url, thread, note))


def update_note(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    thread = thread_of(repo, m["section"], m["iid"])
    note = next((n for n in thread.comments if n.id == int(m["note"])), None)
    if note is None:
        raise HttpError(404, "404 Not found")
    body = body_text(req, 400, "body is missing", NOTE_CHARS, NOTE_TOO_LONG)
    if req.user is None or req.user.login != note.author.login:
        raise HttpError(403, "403 Forbidden")
    done = quick_actions.run(site.world, repo, thread, req.user, body)  # edits run them too
    if done.commands_only:
        thread.comments.remove(note)  # Notes::UpdateService deletes a commands-only note
        return _commands_only(done)
    site.world.edit_comment(note.id, done.text)
    return Response(body=note_json(req.base_url, thread, note))


def _commands_only(done: quick_actions.Outcome) -> Response:
    """A note of nothing but commands is not saved (lib/api/helpers/notes_helpers.rb)."""
    if not done.summary:
        raise HttpError(400, "Commands did not apply")
    return Response(202, {"commands_changes": done.changes, "summary": done.summary})


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", THREAD + "/notes", list_notes),
    Endpoint("POST", THREAD + "/notes", create_note),
    Endpoint("PUT", THREAD + r"/notes/(?P<note>\d+)", update_note),
]
