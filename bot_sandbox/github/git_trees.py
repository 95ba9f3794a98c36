"""The git database's trees (read and created) and blobs (read)."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from bot_sandbox.github.lookup import REPO, refuse_push, repo_of
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import (
    EXECUTABLE,
    REGULAR,
    SYMLINK,
    blob_sha,
    listing,
    tree_sha,
)


def get_tree(site: Site, req: Request, m: re.Match[str]) -> Response:
    # "Get a tree" (not recursive): the entries directly in it, blobs with their mode
    # (100644, 100755, 120000) and git object id, subdirectories as trees to follow.
    # https://docs.github.com/rest/git/trees#get-a-tree
    repo = repo_of(site.world, m)
    root, prefix = repo.subtrees.get(m["sha"], (m["sha"], ""))
    files = repo.trees.get(root)
    if files is None:
        raise HttpError(404, "Not Found")
    base = f"{req.base_url}/repos/{repo.path}/git"
    entries: list[dict[str, Any]] = []
    for name, (mode, data) in listing(files, repo.tree_modes.get(root, {}), prefix).items():
        if data is None:
            sub = hashlib.sha1(f"{root}:{prefix}{name}/".encode()).hexdigest()
            repo.subtrees[sub] = (root, f"{prefix}{name}/")
            entry = {"path": name, "mode": mode, "type": "tree", "sha": sub}
            entries.append({**entry, "url": f"{base}/trees/{sub}"})
        else:
            oid = blob_sha(data)
            entry = {"path": name, "mode": mode, "type": "blob", "sha": oid}
            entries.append({**entry, "size": len(data), "url": f"{base}/blobs/{oid}"})
    return Response(
        body={
            "sha": m["sha"],
            "url": f"{base}/trees/{m['sha']}",
            "tree": entries,
            "truncated": False,
        }
    )


def create_tree(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    refuse_push(site.world, repo, None, req)
    body = req.body or {}
    base_sha = str(body.get("base_tree")) if body.get("base_tree") else None
    base = repo.trees.get(base_sha) if base_sha else {}
    if base is None:
        raise HttpError(422, "base_tree is not a valid tree")
    files = dict(base)
    modes = dict(repo.tree_modes.get(base_sha or "", {}))
    for entry in body.get("tree") or []:
        path, mode = entry.get("path"), entry.get("mode")
        # "Create a tree": mode is one of 100644 (file), 100755 (executable), 040000
        # (subdirectory), 160000 (submodule) or 120000 (symlink, the content is its target).
        # https://docs.github.com/rest/git/trees#create-a-tree (blobs only here)
        if not isinstance(path, str) or entry.get("type", "blob") != "blob":
            raise HttpError(422, "Validation Failed")
        if mode not in (REGULAR, EXECUTABLE, SYMLINK):
            raise HttpError(422, f"Invalid tree info: mode {mode!r}")
        if "content" in entry:
            files[path] = str(entry["content"]).encode()
            modes[path] = mode
        elif entry.get("sha") is None:
            files.pop(path, None)
            modes.pop(path, None)
        else:
            raise HttpError(422, "blob sha is not supported by the sandbox")
    modes = {p: mode for p, mode in modes.items() if mode != REGULAR}
    sha = tree_sha(files, modes)
    repo.trees[sha] = files
    repo.tree_modes[sha] = modes
    return Response(
        201,
        {
            "sha": sha,
            "url": f"{req.base_url}/repos/{repo.path}/git/trees/{sha}",
            "truncated": False,
            "tree": [],
        },
    )


def get_blob(site: Site, req: Request, m: re.Match[str]) -> Response:
    # "Get a blob": base64 content by git object id (a symlink's blob is its target).
    # https://docs.github.com/rest/git/blobs#get-a-blob
    repo = repo_of(site.world, m)
    data = repo.blob(m["sha"])
    if data is None:
        raise HttpError(404, "Not Found")
    return Response(
        body={
            "content": base64.b64encode(data).decode(),
            "encoding": "base64",
            "url": f"{req.base_url}/repos/{repo.path}/git/blobs/{m['sha']}",
            "sha": m["sha"],
            "size": len(data),
            "node_id": f"B_{m['sha'][:12]}",
        }
    )


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", REPO + r"/git/trees/(?P<sha>[0-9a-f]+)", get_tree),
    Endpoint("POST", REPO + r"/git/trees", create_tree),
    Endpoint("GET", REPO + r"/git/blobs/(?P<sha>[0-9a-f]+)", get_blob),
]
