"""Labels: an issue's (add, remove) and a repository's (create).

Creating one (docs.github.com/rest/issues/labels#create-a-label): 201, or 422 with code
`already_exists`.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from bot_sandbox.github.lookup import REPO, repo_of, thread_of
from bot_sandbox.github.shapes import label_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site

ISSUE = REPO + r"/issues/(?P<number>\d+)"


def add_labels(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    thread = thread_of(repo, m["number"])
    labels = (req.body or {}).get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise HttpError(422, "Validation Failed")
    assert req.user is not None
    site.world.set_labels(
        "github", repo.path, thread.number, thread.labels + labels, thread.kind, req.user.login
    )
    return Response(body=[label_json(req.base_url, repo, n) for n in thread.labels])


def remove_label(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    thread = thread_of(repo, m["number"])
    name = unquote(m["label"])
    if name not in thread.labels:
        raise HttpError(404, "Label does not exist")
    remaining = [x for x in thread.labels if x != name]
    assert req.user is not None
    site.world.set_labels(
        "github", repo.path, thread.number, remaining, thread.kind, req.user.login
    )
    return Response(body=[label_json(req.base_url, repo, n) for n in thread.labels])


def create_label(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = site.world.repos.get(("github", f"{m['owner']}/{m['name']}"))
    if repo is None:
        raise HttpError(404, "Not Found")
    name = str((req.body or {}).get("name") or "")
    if not name:
        raise HttpError(422, "Validation Failed")
    if name in site.repo_labels.setdefault(f"github:{repo.path}", set()):
        error = {"resource": "Label", "code": "already_exists", "field": "name"}
        return Response(422, {"message": "Validation Failed", "errors": [error]})
    site.repo_labels[f"github:{repo.path}"].add(name)
    site.labels_created.append(("github", repo.path, name))
    return Response(201, label_json(req.base_url, repo, name))


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("POST", ISSUE + "/labels", add_labels),
    Endpoint("DELETE", ISSUE + r"/labels/(?P<label>[^/]+)", remove_label),
]
# Served beside the repository's routes, not among them: a label is created in an archived
# repository too (the emulator has never refused it).
REPO_LABELS: list[Endpoint[Site]] = [Endpoint("POST", REPO + "/labels", create_label)]
