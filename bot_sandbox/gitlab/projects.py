"""A project, and its members' access levels."""

from __future__ import annotations

import re

from bot_sandbox.gitlab.lookup import PROJECT, project_of
from bot_sandbox.gitlab.shapes import user_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import ROLES

_ACCESS = {"none": 0, "read": 10, "triage": 20, "write": 30, "maintain": 40, "admin": 50}


def get_project(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    return Response(
        body={
            "id": repo.id,
            "name": repo.path.rsplit("/", 1)[-1],
            "path": repo.path.rsplit("/", 1)[-1],
            "path_with_namespace": repo.path,
            # An empty project has no default branch (null) and `empty_repo: true`.
            "default_branch": repo.default_branch if repo.commits else None,
            "empty_repo": not repo.commits,
            "archived": repo.archived,
            "web_url": f"{req.base_url}/{repo.path}",
        }
    )


def member(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    user = next((u for u in site.world.users.values() if u.id == int(m["user"])), None)
    role = repo.roles.get(user.login) if user else None
    if user is None or role is None or role == "none":
        raise HttpError(404, "404 Not found")
    return Response(body={**user_json(req.base_url, user), "access_level": _access(role)})


def _access(role: str) -> int:
    return _ACCESS.get(role, 0) if role in ROLES else 0


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", PROJECT, get_project),
    Endpoint("GET", PROJECT + r"/members/all/(?P<user>\d+)", member),
]
