"""The git database's commits, read and created."""

from __future__ import annotations

import re
from typing import Any

from bot_sandbox.github.lookup import REPO, refuse_push, repo_of
from bot_sandbox.github.shapes import timestamp
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import (
    SCommit,
    SRepo,
)


def get_commit(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    commit = repo.commits.get(m["sha"])
    if commit is None:
        raise HttpError(404, "Not Found")
    return Response(body=_commit_json(req, repo, commit))


def create_commit(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    refuse_push(site.world, repo, None, req)
    body = req.body or {}
    files = repo.trees.get(str(body.get("tree")))
    parents = body.get("parents") or []
    if files is None or any(p not in repo.commits for p in parents) or not body.get("message"):
        raise HttpError(422, "Validation Failed")
    assert req.user is not None
    modes = repo.tree_modes.get(str(body.get("tree")))
    commit = repo.commit(files, str(body["message"]), list(parents), req.user.login, modes)
    return Response(201, _commit_json(req, repo, commit))


def _commit_json(req: Request, repo: SRepo, commit: SCommit) -> dict[str, Any]:
    url = f"{req.base_url}/repos/{repo.path}/git/commits/{commit.sha}"
    return {
        "sha": commit.sha,
        "node_id": f"C_{commit.sha[:12]}",
        "url": url,
        "html_url": f"{req.base_url}/{repo.path}/commit/{commit.sha}",
        "message": commit.message,
        "tree": {
            "sha": commit.tree,
            "url": f"{req.base_url}/repos/{repo.path}/git/trees/{commit.tree}",
        },
        "parents": [
            {"sha": p, "url": f"{req.base_url}/repos/{repo.path}/git/commits/{p}"}
            for p in commit.parents
        ],
        "author": {
            "name": commit.author,
            "email": f"{commit.author}@example.com",
            "date": timestamp(repo.created_at),
        },
        "committer": {
            "name": commit.author,
            "email": f"{commit.author}@example.com",
            "date": timestamp(repo.created_at),
        },
        "verification": {
            "verified": False,
            "reason": "unsigned",
            "signature": None,
            "payload": None,
            "verified_at": None,
        },
    }


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", REPO + r"/git/commits/(?P<sha>[0-9a-f]+)", get_commit),
    Endpoint("POST", REPO + r"/git/commits", create_commit),
]
