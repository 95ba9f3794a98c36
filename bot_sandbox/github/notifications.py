"""Notifications (docs.github.com/rest/activity/notifications).

One thread per issue or pull request and user (`bot_sandbox/mentions.py` keeps them); threads
where the user was mentioned carry reason `mention`; `participating=true` keeps only those the
user takes part in; `all=true` lists the read ones too (default: unread only); `since` keeps those
"last updated after the given time" and `before` those updated before it (OpenAPI parameters
`since`, `before`). The list is newest first, 50 a page at most and by default (OpenAPI:
`per_page` "max 50", default 50), with `Link` headers on this host. Every answer carries
`Last-Modified` and `X-Poll-Interval` (`ForgeServer.notifications_poll_interval`, 60 as in
GitHub's example: "Please obey the header"); a request whose `If-Modified-Since` is not older
gets 304, with both headers (the documented example) (a notification that arrives within the
second of a Last-Modified already sent is dated the next second, so that the list's date moves
on). `PATCH /notifications/threads/{id}` marks one read and answers 205 (OpenAPI "Reset
Content"), setting `last_read_at`. Installation tokens of GitHub Apps get 403 here ("Resource
not accessible by integration").
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

from bot_sandbox.github.shapes import repo_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response, paginate, parse_time
from bot_sandbox.inbox import SNotification
from bot_sandbox.site import Site


def list_notifications(site: Site, req: Request, m: re.Match[str]) -> Response:
    assert req.user is not None
    if site.github_app is not None and site.github_app.is_installation(req):
        raise HttpError(403, "Resource not accessible by integration")
    notes = site.notifications.get(req.user.login, [])
    newest = max((n.updated_at for n in notes), default=datetime.fromtimestamp(0, UTC))
    site.notifications_served[req.user.login] = newest
    headers = {
        "Last-Modified": format_datetime(newest, usegmt=True),
        "X-Poll-Interval": str(site.notifications_poll_interval),
    }
    asked = req.headers.get("If-Modified-Since")
    if asked and parsedate_to_datetime(asked) >= newest:
        return Response(304, None, headers)
    chosen = [
        notification_json(req.base_url, n)
        for n in sorted(notes, key=lambda n: (n.updated_at, n.id), reverse=True)
        if _listed(req, n)
    ]
    page, links = paginate(req, chosen, default=50, cap=50)
    return Response(body=page, headers={**headers, **links})


def mark_read(site: Site, req: Request, m: re.Match[str]) -> Response:
    assert req.user is not None
    for note in site.notifications.get(req.user.login, []):
        if note.id == int(m["id"]):
            note.unread = False
            note.last_read_at = site.world.clock()
            return Response(205, None)
    raise HttpError(404, "Not Found")


def _listed(req: Request, note: SNotification) -> bool:
    if not note.unread and req.query.get("all") != "true":
        return False
    participating = ("mention", "author", "comment", "assign")
    if req.query.get("participating") == "true" and note.reason not in participating:
        return False
    since, before = req.query.get("since"), req.query.get("before")
    if since and note.updated_at <= _since(since):
        return False
    return not (before and note.updated_at >= _since(before))


def _since(value: str) -> datetime:
    parsed = parse_time(value)
    if parsed is None:
        raise HttpError(422, f"invalid since {value!r}")
    return parsed


def notification_json(base: str, note: SNotification) -> dict[str, Any]:
    thread = note.thread
    section = "pulls" if thread.kind == "pull" else "issues"
    subject_url = f"{base}/repos/{note.repo.path}/{section}/{thread.number}"
    return {
        "id": str(note.id),
        "repository": repo_json(base, note.repo),
        "subject": {
            "title": thread.title,
            "url": subject_url,
            "latest_comment_url": subject_url,
            "type": "PullRequest" if thread.kind == "pull" else "Issue",
        },
        "reason": note.reason,
        "unread": note.unread,
        "updated_at": _stamp(note.updated_at),
        "last_read_at": _stamp(note.last_read_at) if note.last_read_at else None,
        "url": f"{base}/notifications/threads/{note.id}",
        "subscription_url": f"{base}/notifications/threads/{note.id}/subscription",
    }


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", r"/notifications", list_notifications),
    Endpoint("PATCH", r"/notifications/threads/(?P<id>\d+)", mark_read),
]
