"""Repository archives: the tarball link (a 302) and the archive host it points to.

github.com answers with a redirect to codeload.github.com (another host), GitHub Enterprise Server
to `/_codeload/...` on its own host (`ForgeServer(archive_host="same")`); either link carries its
own short-lived token (`bot_sandbox/archives.py`)."""

from __future__ import annotations

import re
from urllib.parse import unquote

from bot_sandbox.archives import archive_response
from bot_sandbox.github.lookup import REPO, repo_of
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site

LEGACY = r"/(?P<owner>[^/]+)/(?P<name>[^/]+)/legacy\.tar\.gz/(?P<sha>[0-9a-f]+)"


def tarball_link(site: Site, req: Request, m: re.Match[str]) -> Response:
    # github.com: 302 to codeload.github.com (another host); GHES: to /_codeload/ on its
    # own host. Either way the link carries its own short-lived token.
    repo = repo_of(site.world, m)
    commit = repo.resolve(unquote(m["ref"]))
    if commit is None:
        raise HttpError(404, "Not Found")
    link = f"/{repo.path}/legacy.tar.gz/{commit.sha}?token={site.archive_links.issue()}"
    if site.archive_host == "same":
        location = f"{req.base_url}/_codeload{link}"
    else:
        location = f"{site.codeload_url}{link}"
    return Response(302, None, {"Location": location})


def ghes_codeload(site: Site, req: Request, m: re.Match[str]) -> Response:
    if site.archive_host != "same":  # github.com serves archives from another host only
        raise HttpError(404, "Not Found")
    repo = repo_of(site.world, m)
    commit = repo.resolve(m["sha"])
    if commit is None:
        raise HttpError(404, "Not Found")
    return archive_response(repo, commit, f"{repo.path.replace('/', '-')}-{commit.sha[:7]}")


def codeload(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = site.world.repos.get(("github", f"{m['owner']}/{m['name']}"))
    commit = repo.resolve(m["sha"]) if repo is not None else None
    if repo is None or commit is None:
        raise HttpError(404, "Not Found")
    return archive_response(repo, commit, f"{repo.path.replace('/', '-')}-{commit.sha[:7]}")


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", REPO + r"/tarball/(?P<ref>.+)", tarball_link),
    Endpoint("GET", r"/_codeload" + LEGACY, ghes_codeload),
]
# The archive host github.com redirects to: `/{owner}/{name}/legacy.tar.gz/{sha}`.
CODELOAD: list[Endpoint[Site]] = [Endpoint("GET", LEGACY, codeload)]
