"""Comparing branches, tags or commits."""

from __future__ import annotations

import re

from bot_sandbox.gitlab.lookup import PROJECT, project_of
from bot_sandbox.gitlab.shapes import commit_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site


def compare(site: Site, req: Request, m: re.Match[str]) -> Response:
    # "Compare branches, tags or commits": with `straight=false` (the default) from the
    # merge base of `from` and `to`; `commits` are those of `to` since it.
    # https://docs.gitlab.com/api/repositories/#compare-branches-tags-or-commits
    repo = project_of(site.world, m)
    start, end = req.query.get("from", ""), req.query.get("to", "")
    head = repo.resolve(end)
    straight = req.query.get("straight", "false").lower() == "true"
    base_sha = start if straight else repo.merge_base(start, end)
    base, origin = repo.resolve(base_sha or ""), repo.resolve(start)
    if head is None or base is None or origin is None:
        raise HttpError(404, "404 Ref Not Found")
    ahead = repo.ancestors(head.sha) - repo.ancestors(origin.sha)
    diffs = [
        {
            "old_path": path,
            "new_path": path,
            "new_file": path not in base.files,
            "deleted_file": path not in head.files,
            "renamed_file": False,
            "diff": "",
        }
        for path in sorted(set(base.files) | set(head.files))
        if base.files.get(path) != head.files.get(path)
        or base.modes.get(path) != head.modes.get(path)
    ]
    return Response(
        body={
            "commit": commit_json(head),
            "commits": [commit_json(repo.commits[sha]) for sha in sorted(ahead)],
            "diffs": diffs,
            "compare_timeout": False,
            "compare_same_ref": start == end,
        }
    )


ENDPOINTS: list[Endpoint[Site]] = [Endpoint("GET", PROJECT + r"/repository/compare", compare)]
