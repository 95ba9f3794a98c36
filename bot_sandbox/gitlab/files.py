"""A repository's files at a ref, raw and with their metadata.

https://docs.gitlab.com/api/repository_files/
"""

from __future__ import annotations

import base64
import hashlib
import re
from urllib.parse import unquote

from bot_sandbox.gitlab.lookup import PROJECT, project_of
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import EXECUTABLE


def raw_file(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    data = repo.file_at(req.query.get("ref") or repo.default_branch, unquote(m["path"]))
    if data is None:
        raise HttpError(404, "404 File Not Found")
    return Response(raw=data, headers={"Content-Type": "text/plain"})


def file_meta(site: Site, req: Request, m: re.Match[str]) -> Response:
    # "Get file from repository": content plus the commit that last changed the file
    # (`last_commit_id`), which writers send back to detect a concurrent change.
    # https://docs.gitlab.com/api/repository_files/#get-file-from-repository
    repo = project_of(site.world, m)
    commit = repo.resolve(req.query.get("ref") or "")
    path = unquote(m["path"])
    if commit is None or path not in commit.files:
        raise HttpError(404, "404 File Not Found")
    data = commit.files[path]
    return Response(
        body={
            "file_name": path.rsplit("/", 1)[-1],
            "file_path": path,
            "size": len(data),
            "encoding": "base64",
            "content": base64.b64encode(data).decode(),
            "content_sha256": hashlib.sha256(data).hexdigest(),
            "ref": req.query.get("ref"),
            "blob_id": hashlib.sha1(data).hexdigest(),
            "commit_id": commit.sha,
            "last_commit_id": repo.last_commit_for(path, commit.sha),
            "execute_filemode": commit.modes.get(path) == EXECUTABLE,
        }
    )


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", PROJECT + r"/repository/files/(?P<path>[^/]+)/raw", raw_file),
    Endpoint("GET", PROJECT + r"/repository/files/(?P<path>[^/]+)", file_meta),
]
