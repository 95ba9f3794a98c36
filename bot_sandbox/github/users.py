"""Who is who: the caller (`GET /user`) and a collaborator's permission on a repository."""

from __future__ import annotations

import re
from urllib.parse import unquote

from bot_sandbox.github.lookup import REPO, repo_of
from bot_sandbox.github.shapes import timestamp, user_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site


def get_user(site: Site, req: Request, m: re.Match[str]) -> Response:
    assert req.user is not None
    created = timestamp(
        (site.world.repos and min(r.created_at for r in site.world.repos.values())) or None
    )
    private = {
        "name": req.user.login,
        "company": None,
        "blog": None,
        "location": None,
        "email": None,
        "hireable": None,
        "bio": None,
        "public_repos": 0,
        "public_gists": 0,
        "followers": 0,
        "following": 0,
        "created_at": created,
        "updated_at": created,
        "private_gists": 0,
        "total_private_repos": 0,
        "owned_private_repos": 0,
        "disk_usage": 0,
        "collaborators": 0,
        "two_factor_authentication": True,
    }
    return Response(body={**user_json(req.base_url, req.user), **private})


def permission(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    login = unquote(m["user"])
    if login not in site.world.users:
        raise HttpError(404, "Not Found")
    role = repo.roles.get(login, "read")
    legacy = {"maintain": "write", "triage": "read", "none": "none"}.get(role, role)
    user = {**user_json(req.base_url, site.world.users[login]), "role_name": role}
    return Response(body={"permission": legacy, "role_name": role, "user": user})


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", r"/user", get_user),
    Endpoint("GET", REPO + r"/collaborators/(?P<user>[^/]+)/permission", permission),
]
