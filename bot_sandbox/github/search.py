"""Issue search (docs.github.com/rest/search/search#search-issues-and-pull-requests).

`q` holds qualifiers; `label:"a","b"` matches any listed label, several `user:`/`org:`/`repo:`
qualifiers match any of them; a query longer than 256 characters is refused with 422; the answer
is `{total_count, incomplete_results, items}`; the endpoint has its own limit of 30 requests a
minute in a bucket of its own (`bot_sandbox/search_limit.py`: every answer carries the search
bucket's headers, the 31st search of a window is answered 403).
"""

from __future__ import annotations

import re

from bot_sandbox.github.thread_shapes import issue_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response, paginate
from bot_sandbox.site import Site
from bot_sandbox.world import SRepo, SThread

_TERM = re.compile(r'(-?)(\w+):((?:"[^"]*"|[^\s,"]+)(?:,(?:"[^"]*"|[^\s,"]+))*)|(\S+)')


def search_issues(site: Site, req: Request, m: re.Match[str]) -> Response:
    query = req.query.get("q", "")
    if not query or len(query) > 256:
        raise HttpError(422, "Validation Failed")
    assert req.user is not None
    allowed, limit = site.search_limit.take(req.user.login)
    if not allowed:
        raise HttpError(403, "API rate limit exceeded for search.", limit)
    terms = parse_query(query)
    items = [
        issue_json(req.base_url, repo, thread)
        for repo in site.world.repos.values()
        if repo.platform == "github" and _visible(site, req, repo)
        for thread in sorted(repo.threads.values(), key=lambda t: -t.updated_at.timestamp())
        if _matches(repo, thread, terms)
    ]
    page, headers = paginate(req, items)
    body = {"total_count": len(items), "incomplete_results": False, "items": page}
    return Response(body=body, headers={**headers, **limit})


def parse_query(query: str) -> dict[str, list[str]]:
    terms: dict[str, list[str]] = {}
    for match in _TERM.finditer(query):
        if match.group(4):
            terms.setdefault("text", []).append(match.group(4))
            continue
        values = [v.strip('"') for v in re.findall(r'"[^"]*"|[^,]+', match.group(3))]
        terms.setdefault(match.group(1) + match.group(2).lower(), []).extend(values)
    return terms


def _visible(site: Site, request: Request, repo: SRepo) -> bool:
    """Whether the caller may see `repo` (an installation token sees its repositories)."""
    return site.github_app is None or site.github_app.may_see(request, repo.path)


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


ENDPOINTS: list[Endpoint[Site]] = [Endpoint("GET", r"/search/issues", search_issues)]
