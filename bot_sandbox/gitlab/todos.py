"""To-Do items (docs.gitlab.com/api/todos).

`GET /todos` lists the pending ones (`state`), filtered by `action`, `type` (Issue,
MergeRequest) and `project_id`, newest first (`TodosFinder#sort` defaults to `id_desc`,
app/finders/todos_finder.rb), paginated as every GitLab list (20 a page by default, 100 at most,
`Link` and `X-Next-Page`: docs.gitlab.com/api/rest, "Pagination"); `POST /todos/:id/mark_as_done`
answers with the item. `bot_sandbox/mentions.py` creates them."""

from __future__ import annotations

import re
from typing import Any

from bot_sandbox.gitlab.shapes import listed_json, note_json, timestamp, user_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.inbox import STodo
from bot_sandbox.site import Site


def todos(site: Site, req: Request, m: re.Match[str]) -> Response:
    assert req.user is not None
    action = req.query.get("action")
    state = req.query.get("state", "pending")
    kind = req.query.get("type")
    project = req.query.get("project_id")
    items = [
        todo_json(req.base_url, t)
        for t in sorted(site.todos.get(req.user.login, []), key=lambda t: -t.id)
        if t.state == state
        and (action is None or t.action == action)
        and (kind is None or kind == ("MergeRequest" if t.thread.kind == "mr" else "Issue"))
        and (project is None or project == str(t.repo.id))
    ]
    return Response(body=items, paginate=True)


def mark_done(site: Site, req: Request, m: re.Match[str]) -> Response:
    assert req.user is not None
    for todo in site.todos.get(req.user.login, []):
        if todo.id == int(m["id"]):
            todo.state = "done"
            return Response(201, todo_json(req.base_url, todo))
    raise HttpError(404, "404 Not found")


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
        "created_at": timestamp(todo.note.created_at),
    }


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", r"/api/v4/todos", todos),
    Endpoint("POST", r"/api/v4/todos/(?P<id>\d+)/mark_as_done", mark_done),
]
