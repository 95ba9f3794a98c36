"""GitLab discovery endpoints: group and instance listings, To-Do items, project labels.

Group listings (docs.gitlab.com/api/issues, "List group issues"; api/merge_requests, "List group
merge requests") cover the group's subgroups and take the same filters as a project's listing;
`labels=a,b` wants every listed label. Instance listings (`GET /issues`, `GET /merge_requests`)
take `scope` (`created_by_me` by default, `assigned_to_me`, `all`). Every item carries
`references.full` (`group/project#iid`, `!iid` for merge requests).

To-Do items (docs.gitlab.com/api/todos): `GET /todos` lists the pending ones (`state`), filtered
by `action`, `type` (Issue, MergeRequest) and `project_id`, newest first (`TodosFinder#sort`
defaults to `id_desc`, app/finders/todos_finder.rb), paginated as every GitLab list (20 a page
by default, 100 at most, `Link` and `X-Next-Page`: docs.gitlab.com/api/rest, "Pagination");
`POST /todos/:id/mark_as_done` answers with the item.

Labels (docs.gitlab.com/api/labels, "Create a new label"): 201, or 409 `Label already exists`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from bot_sandbox.forge_server import HttpError, Request, Response, Route
from bot_sandbox.gitlab_api import _parse, _ts, note_json, thread_json, user_json
from bot_sandbox.world import SComment, SRepo, SThread

if TYPE_CHECKING:
    from bot_sandbox.forge_server import ForgeServer


@dataclass
class STodo:
    id: int
    repo: SRepo
    thread: SThread
    action: str  # "mentioned" or "directly_addressed"
    note: SComment
    state: str = "pending"


def listed_json(base: str, repo: SRepo, thread: SThread) -> dict[str, Any]:
    sign = "!" if thread.kind == "mr" else "#"
    data = thread_json(base, repo, thread)
    data["references"] = {
        "short": f"{sign}{thread.number}",
        "relative": f"{sign}{thread.number}",
        "full": f"{repo.path}{sign}{thread.number}",
    }
    return data


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
    return after is None or thread.updated_at >= _parse(after)


def routes(server: ForgeServer) -> list[Route]:
    world = server.world

    def listing(req: Request, repos: list[SRepo], kind: str) -> Response:
        threads = [
            (repo, thread)
            for repo in repos
            for thread in repo.threads.values()
            if _filter(req, repo, thread, kind)
        ]
        threads.sort(key=lambda pair: pair[1].updated_at, reverse=True)
        body = [listed_json(req.base_url, repo, thread) for repo, thread in threads]
        return Response(body=body, paginate=True)

    def gitlab_repos() -> list[SRepo]:
        return [r for r in world.repos.values() if r.platform == "gitlab"]

    def group_list(req: Request, m: re.Match[str]) -> Response:
        group = unquote(m["group"])
        members = [r for r in gitlab_repos() if r.path.startswith(group + "/")]
        if not members:
            raise HttpError(404, "404 Group Not Found")
        req.query.setdefault("scope", "all")  # group listings are not limited to the caller
        return listing(req, members, "mr" if m["section"] == "merge_requests" else "issue")

    def instance_list(req: Request, m: re.Match[str]) -> Response:
        return listing(req, gitlab_repos(), "mr" if m["section"] == "merge_requests" else "issue")

    def todos(req: Request, m: re.Match[str]) -> Response:
        assert req.user is not None
        action = req.query.get("action")
        state = req.query.get("state", "pending")
        kind = req.query.get("type")
        project = req.query.get("project_id")
        items = [
            todo_json(req.base_url, t)
            for t in sorted(server.todos.get(req.user.login, []), key=lambda t: -t.id)
            if t.state == state
            and (action is None or t.action == action)
            and (kind is None or kind == ("MergeRequest" if t.thread.kind == "mr" else "Issue"))
            and (project is None or project == str(t.repo.id))
        ]
        return Response(body=items, paginate=True)

    def mark_done(req: Request, m: re.Match[str]) -> Response:
        assert req.user is not None
        for todo in server.todos.get(req.user.login, []):
            if todo.id == int(m["id"]):
                todo.state = "done"
                return Response(201, todo_json(req.base_url, todo))
        raise HttpError(404, "404 Not found")

    def create_label(req: Request, m: re.Match[str]) -> Response:
        ident = unquote(m["project"])
        repo = next((r for r in gitlab_repos() if r.path == ident or str(r.id) == ident), None)
        if repo is None:
            raise HttpError(404, "404 Project Not Found")
        name = str((req.body or {}).get("name") or "")
        if not name or not (req.body or {}).get("color"):
            raise HttpError(400, "name and color are required")
        existing = server.repo_labels.setdefault(f"gitlab:{repo.path}", set())
        if name in existing:
            raise HttpError(409, "Label already exists")
        existing.add(name)
        server.labels_created.append(("gitlab", repo.path, name))
        return Response(201, {"id": world.next_id(), "name": name, "color": "#428BCA"})

    table: list[tuple[str, str, Any]] = [
        ("GET", r"/api/v4/groups/(?P<group>[^/]+)/(?P<section>issues|merge_requests)", group_list),
        ("GET", r"/api/v4/(?P<section>issues|merge_requests)", instance_list),
        ("GET", r"/api/v4/todos", todos),
        ("POST", r"/api/v4/todos/(?P<id>\d+)/mark_as_done", mark_done),
        ("POST", r"/api/v4/projects/(?P<project>[^/]+)/labels", create_label),
    ]
    return [Route(method, re.compile(pattern), handler) for method, pattern, handler in table]


def todo_json(base: str, todo: STodo) -> dict[str, Any]:
    thread = todo.thread
    return {
        "id": todo.id,
        "project": {"id": todo.repo.id, "path_with_namespace": todo.repo.path},
        "author": user_json(base, todo.note.author),
        "action_name": todo.action,
        "target_type": "MergeRequest" if thread.kind == "mr" else "Issue",
        "target": listed_json(base, todo.repo, thread),
        "target_url": f"{base}/{todo.repo.path}/-/issues/{thread.number}",
        "body": todo.note.body,
        "note": note_json(base, thread, todo.note),
        "state": todo.state,
        "created_at": _ts(todo.note.created_at),
    }
