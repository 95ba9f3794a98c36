"""Repository archives, rate-limited per user as GitLab.com does (see forge_server)."""

from __future__ import annotations

import re

from bot_sandbox.archives import archive_response
from bot_sandbox.gitlab.lookup import PROJECT, project_of
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site


def archive(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    if req.user is not None and not site.take_gitlab_archive(req.user.login):
        # GitLab.com: 5 archive requests a minute per user; the application rate limiter
        # answers 429 with this body and no Retry-After (gitlab-org/gitlab!25750, !30668).
        raise HttpError(429, "This endpoint has been requested too many times. Try later.")
    commit = repo.resolve(req.query.get("sha") or repo.default_branch)
    if commit is None:
        raise HttpError(404, "404 Commit Not Found")
    return archive_response(
        repo, commit, f"{repo.path.rsplit('/', 1)[-1]}-{commit.sha}-{commit.sha}"
    )


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", PROJECT + r"/repository/archive(?:\.tar\.gz)?", archive),
]
