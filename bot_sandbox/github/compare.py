"""Comparing two commits."""

from __future__ import annotations

import re
from urllib.parse import unquote

from bot_sandbox.github.lookup import REPO, repo_of
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site


def compare(site: Site, req: Request, m: re.Match[str]) -> Response:
    # "Compare two commits" with `base...head`: the commits of head since the merge base
    # and the files they change (at most 300 listed). `status` is "behind" or "identical"
    # when head is already in base's history.
    # https://docs.github.com/rest/commits/commits#compare-two-commits
    repo = repo_of(site.world, m)
    base, head = repo.resolve(unquote(m["base"])), repo.resolve(unquote(m["head"]))
    merge_base = repo.merge_base(unquote(m["base"]), unquote(m["head"]))
    if base is None or head is None or merge_base is None:
        raise HttpError(404, "Not Found")
    ahead = repo.ancestors(head.sha) - repo.ancestors(base.sha)
    behind = repo.ancestors(base.sha) - repo.ancestors(head.sha)
    old, new = repo.commits[merge_base], head
    files = [
        {"filename": path, "status": _file_status(old.files, new.files, path)}
        for path in sorted(set(old.files) | set(new.files))
        if old.files.get(path) != new.files.get(path) or old.modes.get(path) != new.modes.get(path)
    ]
    status = "identical" if base.sha == head.sha else "ahead"
    if not ahead and behind:
        status = "behind"
    elif ahead and behind:
        status = "diverged"
    return Response(
        body={
            "url": f"{req.base_url}/repos/{repo.path}/compare/{m['base']}...{m['head']}",
            "status": status,
            "ahead_by": len(ahead),
            "behind_by": len(behind),
            "total_commits": len(ahead),
            "merge_base_commit": {"sha": merge_base},
            "base_commit": {"sha": base.sha},
            "commits": [{"sha": sha} for sha in sorted(ahead)],
            "files": files[:300],
        }
    )


def _file_status(old: dict[str, bytes], new: dict[str, bytes], path: str) -> str:
    if path not in old:
        return "added"
    return "removed" if path not in new else "modified"


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", REPO + r"/compare/(?P<base>.+?)\.\.\.(?P<head>.+)", compare),
]
