"""Pull requests: the list (filtered by `head`), one request, a new one."""

from __future__ import annotations

import re

from bot_sandbox.github.lookup import REPO, head_repo_of, repo_of, thread_of
from bot_sandbox.github.thread_shapes import pull_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import SChangeRequest, SRepo, SThread, World

PULL = REPO + r"/pulls/(?P<number>\d+)"


def get_pull(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    thread = thread_of(repo, m["number"], ("pull",))
    return Response(body=pull_json(req.base_url, repo, thread, head_repo_of(site.world, thread)))


def list_pulls(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    head = req.query.get("head")
    state = req.query.get("state", "open")
    items = [
        pull_json(req.base_url, repo, t, head_repo_of(site.world, t))
        for t in sorted(repo.threads.values(), key=lambda t: -t.number)
        if t.kind == "pull"
        and (state == "all" or t.state == state)
        and (head is None or head == f"{_head_owner(site.world, repo, t)}:{t.head_ref}")
    ]
    return Response(body=items, paginate=True)


def create_pull(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    body = req.body or {}
    head, base = str(body.get("head", "")), str(body.get("base", ""))
    head = head.split(":", 1)[-1]
    if head not in repo.branches or base not in repo.branches or not body.get("title"):
        raise HttpError(422, "Validation Failed")
    if any(
        # The same head means the same repository and branch: a fork's request from a
        # branch of that name is another head (`owner:ref`).
        t.kind == "pull" and t.state == "open" and t.head_ref == head and not t.head_repo
        for t in repo.threads.values()
    ):
        raise HttpError(422, f"A pull request already exists for {repo.owner.login}:{head}.")
    if len(str(body.get("body") or "")) > 65_536:  # as a comment's (github/comments.py)
        raise HttpError(422, "Validation Failed: body is too long (maximum is 65536 characters)")
    if body.get("draft") and not repo.drafts_supported:
        # Private repositories on GitHub Free/Pro: 422 with this message at the top level
        # (reported e.g. in https://github.com/SWE-agent/SWE-agent/issues/179; plans:
        # https://docs.github.com/en/pull-requests/collaborating-with-pull-requests/proposing-changes-to-your-work-with-pull-requests/about-pull-requests#draft-pull-requests).
        raise HttpError(422, "Draft pull requests are not supported in this repository.")
    assert req.user is not None
    change = SChangeRequest(
        str(body["title"]), str(body.get("body") or ""), head, base, bool(body.get("draft"))
    )
    thread = site.world.open_change_request("github", repo.path, req.user.login, change)
    return Response(201, pull_json(req.base_url, repo, thread, head_repo_of(site.world, thread)))


def _head_owner(world: World, repo: SRepo, thread: SThread) -> str:
    """`head` filters "by head user or head organization and branch name in the format
    of user:ref-name": a fork's request is its owner's, not the base repository's.
    https://docs.github.com/rest/pulls/pulls#list-pull-requests"""
    fork = head_repo_of(world, thread)
    return (fork.owner if fork is not None else repo.owner).login


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", PULL, get_pull),
    Endpoint("GET", REPO + r"/pulls", list_pulls),
    Endpoint("POST", REPO + r"/pulls", create_pull),
]
