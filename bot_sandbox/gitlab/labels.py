"""Labels: an issuable's label events, and a project's labels (create).

Creating one (docs.gitlab.com/api/labels, "Create a new label"): 201, or 409 `Label already
exists`.
"""

from __future__ import annotations

import re

from bot_sandbox.gitlab.lookup import PROJECT, THREAD, project_of, thread_of
from bot_sandbox.gitlab.shapes import timestamp, user_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site


def label_events(site: Site, req: Request, m: re.Match[str]) -> Response:
    # https://docs.gitlab.com/api/resource_label_events/ : who added or removed which
    # label, oldest first; `user` is who did it, `action` is "add" or "remove".
    repo = project_of(site.world, m)
    thread = thread_of(repo, m["section"], m["iid"])
    items = [
        {
            "id": e.id,
            "user": user_json(req.base_url, e.actor),
            "created_at": timestamp(e.at),
            "resource_type": "MergeRequest" if thread.kind == "mr" else "Issue",
            "resource_id": thread.id,
            "label": {
                "id": abs(hash((repo.path, e.name))) % 10**6,
                "name": e.name,
                "color": "#ededed",
                "description": None,
            },
            "action": "add" if e.kind == "labeled" else "remove",
        }
        for e in thread.events
        if e.kind in ("labeled", "unlabeled")
    ]
    return Response(body=items, paginate=True)


def create_label(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    name = str((req.body or {}).get("name") or "")
    if not name or not (req.body or {}).get("color"):
        raise HttpError(400, "name and color are required")
    existing = site.repo_labels.setdefault(f"gitlab:{repo.path}", set())
    if name in existing:
        raise HttpError(409, "Label already exists")
    existing.add(name)
    site.labels_created.append(("gitlab", repo.path, name))
    return Response(201, {"id": site.world.next_id(), "name": name, "color": "#428BCA"})


ENDPOINTS: list[Endpoint[Site]] = [Endpoint("GET", THREAD + "/resource_label_events", label_events)]
# Served beside the project's routes, not among them: a label is created in an archived project
# too (the emulator has never refused it).
PROJECT_LABELS: list[Endpoint[Site]] = [Endpoint("POST", PROJECT + "/labels", create_label)]
