"""Issues (pull requests are issues too): the list, one issue, its events."""

from __future__ import annotations

import re
from typing import Any

from bot_sandbox.github.lookup import REPO, repo_of, thread_of
from bot_sandbox.github.shapes import timestamp, user_json
from bot_sandbox.github.thread_shapes import issue_json
from bot_sandbox.http import Endpoint, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import SEvent, SRepo, SThread, SUser

ISSUE = REPO + r"/issues/(?P<number>\d+)"


def list_issues(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    state = req.query.get("state", "open")
    labels = [x for x in req.query.get("labels", "").split(",") if x]
    since = req.query.get("since")
    assignee = req.query.get("assignee")
    items = []
    for thread in sorted(repo.threads.values(), key=lambda t: -t.number):
        if state != "all" and thread.state != state:
            continue
        if any(label not in thread.labels for label in labels):
            continue
        # Any login filters, an unknown one or an app's `<slug>[bot]` too: 200 with the
        # issues it is assigned (none), not an error (callers in the wild rely on it:
        # `?creator=github-actions%5Bbot%5D` "returns an empty list with status 200" when
        # misspelt; `?assignee=copilot-swe-agent%5Bbot%5D` lists Copilot's issues).
        if assignee and assignee not in [a.login for a in thread.assignees]:
            continue
        if since and (timestamp(thread.updated_at) or "") < since:
            continue
        items.append(issue_json(req.base_url, repo, thread))
    return Response(body=items, paginate=True)


def get_issue(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    return Response(body=issue_json(req.base_url, repo, thread_of(repo, m["number"])))


def list_events(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    thread = thread_of(repo, m["number"])
    items = [_event_json(req.base_url, repo, thread, e) for e in thread.events]
    return Response(body=items, paginate=True)


def _event_json(base: str, repo: SRepo, thread: SThread, event: SEvent) -> dict[str, Any]:
    """One issue event, oldest first, as `GET /repos/{owner}/{repo}/issues/{n}/events` lists
    them (https://docs.github.com/en/rest/issues/events#list-issue-events): `actor` is who
    did it; `labeled`/`unlabeled` carry the label, `assigned`/`unassigned` the assignee."""
    data: dict[str, Any] = {
        "id": event.id,
        "node_id": f"LE_{event.id}",
        "url": f"{base}/repos/{repo.path}/issues/events/{event.id}",
        "actor": user_json(base, event.actor),
        "event": event.kind,
        "commit_id": None,
        "commit_url": None,
        "created_at": timestamp(event.at),
        "performed_via_github_app": None,
    }
    if event.kind in ("labeled", "unlabeled"):
        data["label"] = {"name": event.name, "color": "ededed"}
    else:
        assignee = next((a for a in thread.assignees if a.login == event.name), None)
        data["assignee"] = user_json(base, assignee or SUser(event.name, 0))
        data["assigner"] = user_json(base, event.actor)
    return data


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", REPO + r"/issues", list_issues),
    Endpoint("GET", ISSUE, get_issue),
    Endpoint("GET", ISSUE + "/events", list_events),
]
