"""A repository and the contents of its files."""

from __future__ import annotations

import base64
import hashlib
import re
from urllib.parse import unquote

from bot_sandbox.github.lookup import REPO, repo_of
from bot_sandbox.github.shapes import repo_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site


def get_repo(site: Site, req: Request, m: re.Match[str]) -> Response:
    return Response(body=repo_json(req.base_url, repo_of(site.world, m)))


def contents(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    ref = req.query.get("ref") or repo.default_branch
    path = unquote(m["path"])
    data = repo.file_at(ref, path)
    if data is None:
        raise HttpError(404, "Not Found")
    url = f"{req.base_url}/repos/{repo.path}/contents/{path}?ref={ref}"
    return Response(
        body={
            "type": "file",
            "encoding": "base64",
            "size": len(data),
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "content": base64.b64encode(data).decode(),
            "sha": hashlib.sha1(data).hexdigest(),
            "url": url,
            "git_url": None,
            "html_url": None,
            "download_url": None,
            "_links": {"self": url, "git": None, "html": None},
        }
    )


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", REPO, get_repo),
    Endpoint("GET", REPO + r"/contents/(?P<path>.+)", contents),
]
