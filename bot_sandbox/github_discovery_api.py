"""GitHub discovery endpoints: issue search, notifications, repository labels.

Search (docs.github.com/rest/search/search#search-issues-and-pull-requests): `q` holds
qualifiers; `label:"a","b"` matches any listed label, several `user:`/`org:`/`repo:` qualifiers
match any of them; a query longer than 256 characters is refused with 422; the answer is
`{total_count, incomplete_results, items}`; the endpoint has its own limit of 30 requests a
minute in a bucket of its own (`forge_server.SearchLimit`: every answer carries the search
bucket's headers, the 31st search of a window is answered 403).

Notifications (docs.github.com/rest/activity/notifications): one thread per issue or pull
request and user (`bot_sandbox/mentions.py` keeps them); threads where the user was mentioned
carry reason `mention`; `participating=true` keeps only those the user takes part in; `all=true`
lists the read ones too (default: unread only); `since` keeps those "last updated after the given
time" and `before` those updated before it (OpenAPI parameters `since`, `before`). The list is
newest first, 50 a page at most and by default (OpenAPI: `per_page` "max 50", default 50), with
`Link` headers on this host. Every answer carries `Last-Modified` and `X-Poll-Interval`
(`ForgeServer.notifications_poll_interval`, 60 as in GitHub's example: "Please obey the
header"); a request whose `If-Modified-Since` is not older gets 304, with both headers (the
documented example) (a notification that arrives within the second of a Last-Modified already
sent is dated the next second, so that the list's date moves on).
`PATCH /notifications/threads/{id}` marks one read and answers 205 (OpenAPI "Reset Content"),
setting `last_read_at`. Installation tokens of GitHub Apps get 403 here ("Resource not
accessible by integration").

Labels (docs.github.com/rest/issues/labels#create-a-label): 201, or 422 with code
`already_exists`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from bot_sandbox.forge_server import HttpError, Request, Response, Route, SearchLimit, paginate
from bot_sandbox.github_api import issue_json, label_json, repo_json
from bot_sandbox.world import SRepo, SThread

if TYPE_CHECKING:
    from bot_sandbox.forge_server import ForgeServer

_TERM = re.compile(r'(-?)(\w+):((?:"[^"]*"|[^\s,"]+)(?:,(?:"[^"]*"|[^\s,"]+))*)|(\S+)')
SEARCH_PER_MINUTE = SearchLimit.PER_MINUTE


@dataclass
class SNotification:
    id: int
    repo: SRepo
    thread: SThread
    reason: str
    updated_at: datetime
    unread: bool = True
    last_read_at: datetime | None = None


def parse_query(query: str) -> dict[str, list[str]]:
    terms: dict[str, list[str]] = {}
    for match in _TERM.finditer(query):
        if match.group(4):
            terms.setdefault("text", []).append(match.group(4))
            continue
        values = [v.strip('"') for v in re.findall(r'"[^"]*"|[^,]+', match.group(3))]
        terms.setdefault(match.group(1) + match.group(2).lower(), []).extend(values)
    return terms


def _matches(repo: SRepo, thread: SThread, terms: dict[str, list[str]]) -> bool:
    for value in terms.get("is", []):
        if value in ("open", "closed") and thread.state != value:
            return False
        if value in ("issue", "pr") and (thread.kind == "pull") != (value == "pr"):
            return False
    owners = terms.get("user", []) + terms.get("org", [])
    scopes = [o.lower() for o in owners]
    repos = [r.lower() for r in terms.get("repo", [])]
    if (scopes or repos) and not (repo.owner.login.lower() in scopes or repo.path.lower() in repos):
        return False
    labels = terms.get("label")
    if labels is not None and not set(labels) & set(thread.labels):
        return False
    assignee = terms.get("assignee")
    return not (assignee and assignee[0] not in [a.login for a in thread.assignees])


def routes(server: ForgeServer) -> list[Route]:
    world = server.world

    def search_issues(req: Request, m: re.Match[str]) -> Response:
        query = req.query.get("q", "")
        if not query or len(query) > 256:
            raise HttpError(422, "Validation Failed")
        assert req.user is not None
        allowed, limit = server.search_limit.take(req.user.login)
        if not allowed:
            raise HttpError(403, "API rate limit exceeded for search.", limit)
        terms = parse_query(query)
        items = [
            issue_json(req.base_url, repo, thread)
            for repo in world.repos.values()
            if repo.platform == "github" and server.github_visible(req, repo)
            for thread in sorted(repo.threads.values(), key=lambda t: -t.updated_at.timestamp())
            if _matches(repo, thread, terms)
        ]
        page, headers = paginate(req, items)
        body = {"total_count": len(items), "incomplete_results": False, "items": page}
        return Response(body=body, headers={**headers, **limit})

    def list_notifications(req: Request, m: re.Match[str]) -> Response:
        assert req.user is not None
        if server.github_app is not None and server.github_app.is_installation(req):
            raise HttpError(403, "Resource not accessible by integration")
        notes = server.notifications.get(req.user.login, [])
        newest = max((n.updated_at for n in notes), default=datetime.fromtimestamp(0, UTC))
        server.notifications_served[req.user.login] = newest
        headers = {
            "Last-Modified": format_datetime(newest, usegmt=True),
            "X-Poll-Interval": str(server.notifications_poll_interval),
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

    def mark_read(req: Request, m: re.Match[str]) -> Response:
        assert req.user is not None
        for note in server.notifications.get(req.user.login, []):
            if note.id == int(m["id"]):
                note.unread = False
                note.last_read_at = world.clock()
                return Response(205, None)
        raise HttpError(404, "Not Found")

    def create_label(req: Request, m: re.Match[str]) -> Response:
        repo = world.repos.get(("github", f"{m['owner']}/{m['name']}"))
        if repo is None:
            raise HttpError(404, "Not Found")
        name = str((req.body or {}).get("name") or "")
        if not name:
            raise HttpError(422, "Validation Failed")
        if name in server.repo_labels.setdefault(f"github:{repo.path}", set()):
            error = {"resource": "Label", "code": "already_exists", "field": "name"}
            return Response(422, {"message": "Validation Failed", "errors": [error]})
        server.repo_labels[f"github:{repo.path}"].add(name)
        server.labels_created.append(("github", repo.path, name))
        return Response(201, label_json(req.base_url, repo, name))

    table: list[tuple[str, str, Any]] = [
        ("GET", r"/search/issues", search_issues),
        ("GET", r"/notifications", list_notifications),
        ("PATCH", r"/notifications/threads/(?P<id>\d+)", mark_read),
        ("POST", r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)/labels", create_label),
    ]
    return [Route(method, re.compile(pattern), handler) for method, pattern, handler in table]


def _listed(req: Request, note: SNotification) -> bool:
    if not note.unread and req.query.get("all") != "true":
        return False
    participating = ("mention", "author", "comment", "assign")
    if req.query.get("participating") == "true" and note.reason not in participating:
        return False
    since, before = req.query.get("since"), req.query.get("before")
    if since and note.updated_at <= _parse(since):
        return False
    return not (before and note.updated_at >= _parse(before))


def _parse(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise HttpError(422, f"invalid since {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


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
