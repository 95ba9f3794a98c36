"""Reading a repository's git data: a branch, a tree, a blob."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import unquote

from bot_sandbox.gitlab.lookup import PROJECT, project_of
from bot_sandbox.gitlab.shapes import commit_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import blob_sha, listing


def branch(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    name = unquote(m["branch"])
    if name not in repo.branches:
        raise HttpError(404, "404 Branch Not Found")
    commit = repo.commits[repo.branches[name]]
    return Response(
        body={
            "name": name,
            "commit": commit_json(commit),
            "protected": name == repo.default_branch,
        }
    )


def tree(site: Site, req: Request, m: re.Match[str]) -> Response:
    # "List repository tree": the entries directly under `path` at `ref`, each with its git
    # `mode` (100644, 100755, 120000, 040000) and object `id`.
    # https://docs.gitlab.com/api/repositories/#list-repository-tree
    repo = project_of(site.world, m)
    commit = repo.resolve(req.query.get("ref") or repo.default_branch)
    where = req.query.get("path", "").strip("/")
    prefix = f"{where}/" if where else ""
    entries = listing(commit.files, commit.modes, prefix) if commit else {}
    if commit is None or (where and not entries):
        raise HttpError(404, "404 Tree Not Found")
    items = [
        {
            "id": blob_sha(data) if data is not None else hashlib.sha1(name.encode()).hexdigest(),
            "name": name,
            "type": "tree" if data is None else "blob",
            "path": prefix + name,
            "mode": mode,
        }
        for name, (mode, data) in entries.items()
    ]
    return Response(body=items, paginate=True)


def raw_blob(site: Site, req: Request, m: re.Match[str]) -> Response:
    # "Raw blob content" by git object id. https://docs.gitlab.com/api/repositories/
    data = project_of(site.world, m).blob(m["sha"])
    if data is None:
        raise HttpError(404, "404 Blob Not Found")
    return Response(raw=data, headers={"Content-Type": "text/plain"})


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", PROJECT + r"/repository/branches/(?P<branch>.+)", branch),
    Endpoint("GET", PROJECT + r"/repository/tree", tree),
    Endpoint("GET", PROJECT + r"/repository/blobs/(?P<sha>[0-9a-f]+)/raw", raw_blob),
]
