"""Users: the caller, and users by name."""

from __future__ import annotations

import re

from bot_sandbox.gitlab.shapes import user_json
from bot_sandbox.http import Endpoint, Request, Response
from bot_sandbox.site import Site


def get_user(site: Site, req: Request, m: re.Match[str]) -> Response:
    assert req.user is not None
    return Response(body={**user_json(req.base_url, req.user), "is_admin": False})


def list_users(site: Site, req: Request, m: re.Match[str]) -> Response:
    login = req.query.get("username")
    users = [u for u in site.world.users.values() if login is None or u.login == login]
    return Response(body=[user_json(req.base_url, u) for u in users], paginate=True)


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", r"/api/v4/user", get_user),
    Endpoint("GET", r"/api/v4/users", list_users),
]
