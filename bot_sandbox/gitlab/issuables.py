"""Issues and merge requests (GitLab's issuables): a project's list, one, an update, a new
merge request."""

from __future__ import annotations

import re

from bot_sandbox.gitlab import quick_actions
from bot_sandbox.gitlab.lookup import PROJECT, THREAD, parse_timestamp, project_of, thread_of
from bot_sandbox.gitlab.shapes import thread_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import SChangeRequest


def list_threads(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    kind = "mr" if m["section"] == "merge_requests" else "issue"
    state = req.query.get("state", "all")
    labels = [x for x in req.query.get("labels", "").split(",") if x]
    assignee = req.query.get("assignee_username")
    source = req.query.get("source_branch")
    after = parse_timestamp(req.query["updated_after"]) if "updated_after" in req.query else None
    order = req.query.get("order_by", "created_at")
    threads = [t for t in repo.threads.values() if t.kind == kind]
    threads.sort(
        key=lambda t: t.updated_at if order == "updated_at" else t.created_at, reverse=True
    )
    items = []
    for thread in threads:
        gl_state = "opened" if thread.state == "open" else thread.state
        if state != "all" and gl_state != state:
            continue
        if any(label not in thread.labels for label in labels):
            continue
        if assignee and assignee not in [a.login for a in thread.assignees]:
            continue
        if source and thread.head_ref != source:
            continue
        if after is not None and thread.updated_at < after:
            continue
        items.append(thread_json(req.base_url, repo, thread))
    return Response(body=items, paginate=True)


def get_thread(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    return Response(body=thread_json(req.base_url, repo, thread_of(repo, m["section"], m["iid"])))


def update_thread(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    thread = thread_of(repo, m["section"], m["iid"])
    body = req.body or {}
    labels = list(thread.labels)
    if "labels" in body:
        labels = [x for x in str(body["labels"]).split(",") if x]
    labels += [x for x in str(body.get("add_labels", "")).split(",") if x]
    removed = {x for x in str(body.get("remove_labels", "")).split(",") if x}
    assert req.user is not None
    kept = [x for x in labels if x not in removed]
    site.world.set_labels("gitlab", repo.path, thread.number, kept, thread.kind, req.user.login)
    if isinstance(body.get("description"), str):
        done = quick_actions.run(site.world, repo, thread, req.user, body["description"])
        thread.body = done.text
    return Response(body=thread_json(req.base_url, repo, thread))


def create_mr(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    body = req.body or {}
    source, target = str(body.get("source_branch", "")), str(body.get("target_branch", ""))
    if source not in repo.branches or target not in repo.branches or not body.get("title"):
        raise HttpError(400, "source_branch, target_branch and title are required")
    if any(
        # Scoped to the source project (MergeRequest#validate_branches, app/models/
        # merge_request.rb): a fork's request from a branch of that name is another's.
        t.kind == "mr" and t.state == "open" and t.head_ref == source and not t.head_repo
        for t in repo.threads.values()
    ):
        raise HttpError(409, "Another open merge request already exists for this source branch")
    if len(str(body.get("description") or "")) > 1_048_576:
        # DESCRIPTION_LENGTH_MAX, 1 megabyte (doc/development/issuable-like-models.md).
        raise HttpError(400, "description is too long (maximum is 1048576 characters)")
    title = str(body["title"])
    draft = title.lower().startswith(("draft:", "[draft]")) or bool(body.get("draft"))
    assert req.user is not None
    change = SChangeRequest(title, str(body.get("description") or ""), source, target, draft)
    thread = site.world.open_change_request("gitlab", repo.path, req.user.login, change)
    thread.body = quick_actions.run(site.world, repo, thread, req.user, thread.body).text
    return Response(201, thread_json(req.base_url, repo, thread))


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", PROJECT + r"/(?P<section>issues|merge_requests)", list_threads),
    Endpoint("GET", THREAD, get_thread),
    Endpoint("PUT", THREAD, update_thread),
    Endpoint("POST", PROJECT + r"/merge_requests", create_mr),
]
