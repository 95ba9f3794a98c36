"""The GitHub App's own endpoints: the app, its installations, installation tokens, and the
repositories an installation token sees. The app itself (keys, tokens) is
`bot_sandbox/github_app.py`; only `/app...` take its JWT."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from bot_sandbox.github.shapes import repo_json, user_json
from bot_sandbox.github_app import AppEmulator, SInstallation
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site


def get_app(site: Site, req: Request, m: re.Match[str]) -> Response:
    emulated = _app(site)
    return Response(
        body={
            "id": emulated.app_id,
            "slug": emulated.slug,
            "node_id": f"A_{emulated.app_id}",
            "owner": _owner(site, req),
            "name": emulated.slug,
            "description": "",
            "external_url": req.base_url,
            "html_url": f"{req.base_url}/apps/{emulated.slug}",
            "created_at": _iso(0),
            "updated_at": _iso(0),
            "permissions": {"issues": "write", "pull_requests": "write"},
            "events": ["issues", "issue_comment"],
        }
    )


def list_installations(site: Site, req: Request, m: re.Match[str]) -> Response:
    body = [_installation_json(site, req, i) for i in _app(site).installations.values()]
    return Response(body=body, paginate=True)


def access_token(site: Site, req: Request, m: re.Match[str]) -> Response:
    inst = _app(site).installations.get(int(m["id"]))
    if inst is None:
        raise HttpError(404, "Not Found")
    token, expires = _app(site).mint(inst.id)
    return Response(
        201,
        {
            "token": token,
            "expires_at": _iso(expires),
            "permissions": {"issues": "write", "pull_requests": "write"},
            "repository_selection": "selected",
        },
    )


def installation_repos(site: Site, req: Request, m: re.Match[str]) -> Response:
    inst = _app(site).installation_of(req)
    if inst is None:
        raise HttpError(403, "This endpoint requires an installation token")
    repos = [repo_json(req.base_url, site.world.repo("github", r)) for r in inst.repos]
    page = int(req.query.get("page", "1"))
    per_page = min(100, int(req.query.get("per_page", "30")))
    chunk = repos[(page - 1) * per_page : page * per_page]
    return Response(body={"total_count": len(repos), "repositories": chunk})


def _app(site: Site) -> AppEmulator:
    if site.github_app is None:
        raise HttpError(404, "Not Found")
    return site.github_app


def _owner(site: Site, req: Request) -> dict[str, Any]:
    return user_json(req.base_url, site.world.user("app-owner"))


def _installation_json(site: Site, req: Request, inst: SInstallation) -> dict[str, Any]:
    base = req.base_url
    return {
        "id": inst.id,
        "account": user_json(base, site.world.user(inst.account)),
        "app_id": _app(site).app_id,
        "app_slug": _app(site).slug,
        "target_id": site.world.user(inst.account).id,
        "target_type": "Organization",
        "repository_selection": "selected",
        "access_tokens_url": f"{base}/app/installations/{inst.id}/access_tokens",
        "repositories_url": f"{base}/installation/repositories",
        "html_url": f"{base}/settings/installations/{inst.id}",
        "permissions": {"issues": "write", "pull_requests": "write", "contents": "write"},
        "events": ["issues", "issue_comment", "pull_request"],
        "created_at": _iso(0),
        "updated_at": _iso(0),
        "single_file_name": None,
    }


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", r"/app", get_app),
    Endpoint("GET", r"/app/installations", list_installations),
    Endpoint("POST", r"/app/installations/(?P<id>\d+)/access_tokens", access_token),
    Endpoint("GET", r"/installation/repositories", installation_repos),
]
