"""The git database's references: a branch's head, read, created and moved."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from bot_sandbox.github.lookup import REPO, refuse_push, repo_of
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import (
    SRepo,
)


def get_ref(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    branch = unquote(m["branch"])
    if not repo.commits:
        # https://docs.github.com/en/rest/git/refs#get-a-reference lists 409 Conflict:
        # the git database API of an empty repository answers "Git Repository is empty."
        raise HttpError(409, "Git Repository is empty.")
    if branch not in repo.branches:
        raise HttpError(404, "Not Found")
    return Response(body=_ref_json(req, repo, branch))


def create_ref(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    body = req.body or {}
    ref, sha = str(body.get("ref", "")), str(body.get("sha", ""))
    if not ref.startswith("refs/heads/") or sha not in repo.commits:
        raise HttpError(422, "Validation Failed")
    branch = ref.removeprefix("refs/heads/")
    _refuse_protected(repo, branch)
    if repo.fork_of is not None and repo.roles.get(req.user.login if req.user else "") is None:
        raise HttpError(404, "Not Found")  # maintainers may push to a request's branch only
    if branch in repo.branches:
        raise HttpError(422, "Reference already exists")
    repo.branches[branch] = sha
    return Response(201, _ref_json(req, repo, branch))


def update_ref(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    branch = unquote(m["branch"])
    sha = str((req.body or {}).get("sha", ""))
    _refuse_protected(repo, branch)
    refuse_push(site.world, repo, branch, req)
    if branch not in repo.branches:
        raise HttpError(422, "Reference does not exist")
    if sha not in repo.commits:
        raise HttpError(422, "Object does not exist")
    # "force: ... Leaving this out or setting it to false will make sure you're not
    # overwriting work": a head that is not an ancestor of `sha` (someone pushed) is a 422
    # "Update is not a fast forward". https://docs.github.com/rest/git/refs#update-a-reference
    if not (req.body or {}).get("force") and not repo.is_ancestor(repo.branches[branch], sha):
        raise HttpError(422, "Update is not a fast forward")
    repo.branches[branch] = sha
    site.world.head_moved(repo, branch)
    return Response(body=_ref_json(req, repo, branch))


def _ref_json(req: Request, repo: SRepo, branch: str) -> dict[str, Any]:
    sha = repo.branches[branch]
    return {
        "ref": f"refs/heads/{branch}",
        "node_id": f"REF_{branch}",
        "url": f"{req.base_url}/repos/{repo.path}/git/refs/heads/{branch}",
        "object": {
            "type": "commit",
            "sha": sha,
            "url": f"{req.base_url}/repos/{repo.path}/git/commits/{sha}",
        },
    }


def _refuse_protected(repo: SRepo, branch: str) -> None:
    # Branch protection refuses ref updates with 422 "Protected branch update failed"
    # (https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches).
    if repo.is_protected(branch):
        raise HttpError(422, f"Protected branch update failed for refs/heads/{branch}.")


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", REPO + r"/git/ref/heads/(?P<branch>.+)", get_ref),
    Endpoint("POST", REPO + r"/git/refs", create_ref),
    Endpoint("PATCH", REPO + r"/git/refs/heads/(?P<branch>.+)", update_ref),
]
