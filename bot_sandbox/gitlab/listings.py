"""Group and instance listings of issues and merge requests.

Group listings (docs.gitlab.com/api/issues, "List group issues"; api/merge_requests, "List group
merge requests") cover the group's subgroups and take the same filters as a project's listing;
`labels=a,b` wants every listed label. Instance listings (`GET /issues`, `GET /merge_requests`)
take `scope` (`created_by_me` by default, `assigned_to_me`, `all`). Every item carries
`references.full` (`group/project#iid`, `!iid` for merge requests)."""

from __future__ import annotations

import re
from urllib.parse import unquote

from bot_sandbox.gitlab.lookup import parse_timestamp
from bot_sandbox.gitlab.shapes import listed_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import SRepo, SThread


def group_list(site: Site, req: Request, m: re.Match[str]) -> Response:
    group = unquote(m["group"])
    members = [r for r in _gitlab_repos(site) if r.path.startswith(group + "/")]
    if not members:
        raise HttpError(404, "404 Group Not Found")
    req.query.setdefault("scope", "all")  # group listings are not limited to the caller
    return _listing(req, members, "mr" if m["section"] == "merge_requests" else "issue")


def instance_list(site: Site, req: Request, m: re.Match[str]) -> Response:
    return _listing(req, _gitlab_repos(site), "mr" if m["section"] == "merge_requests" else "issue")


def _listing(req: Request, repos: list[SRepo], kind: str) -> Response:
    threads = [
        (repo, thread)
        for repo in repos
        for thread in repo.threads.values()
        if _filter(req, repo, thread, kind)
    ]
    threads.sort(key=lambda pair: pair[1].updated_at, reverse=True)
    body = [listed_json(req.base_url, repo, thread) for repo, thread in threads]
    return Response(body=body, paginate=True)


def _gitlab_repos(site: Site) -> list[SRepo]:
    return [r for r in site.world.repos.values() if r.platform == "gitlab"]


def _filter(req: Request, repo: SRepo, thread: SThread, kind: str) -> bool:
    if thread.kind != kind:
        return False
    state = req.query.get("state", "all")
    if state != "all" and ("opened" if thread.state == "open" else thread.state) != state:
        return False
    labels = [x for x in req.query.get("labels", "").split(",") if x]
    if any(label not in thread.labels for label in labels):
        return False
    scope = req.query.get("scope")
    assert req.user is not None
    if scope == "assigned_to_me" and req.user.login not in [a.login for a in thread.assignees]:
        return False
    if scope in (None, "created_by_me") and thread.author.login != req.user.login:
        return False
    after = req.query.get("updated_after")
    return after is None or thread.updated_at >= parse_timestamp(after)


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint(
        "GET", r"/api/v4/groups/(?P<group>[^/]+)/(?P<section>issues|merge_requests)", group_list
    ),
    Endpoint("GET", r"/api/v4/(?P<section>issues|merge_requests)", instance_list),
]
