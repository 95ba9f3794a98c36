"""Reading a GitLab request: the project and the issue or merge request its path names, the notes
the caller may read, and its timestamps."""

from __future__ import annotations

import re
from datetime import datetime
from urllib.parse import unquote

from bot_sandbox.http import HttpError, Request, parse_time
from bot_sandbox.world import ROLES, SComment, SRepo, SThread, World

PROJECT = r"/api/v4/projects/(?P<project>[^/]+)"
THREAD = PROJECT + r"/(?P<section>issues|merge_requests)/(?P<iid>\d+)"


def project_of(world: World, match: re.Match[str]) -> SRepo:
    ident = unquote(match["project"])
    for repo in world.repos.values():
        if repo.platform == "gitlab" and (repo.path == ident or str(repo.id) == ident):
            return repo
    raise HttpError(404, "404 Project Not Found")


def thread_of(repo: SRepo, section: str, number: str) -> SThread:
    thread = repo.thread("mr" if section == "merge_requests" else "issue", int(number))
    if thread is None:
        raise HttpError(404, "404 Not found")
    return thread


def visible_notes(req: Request, repo: SRepo, thread: SThread) -> list[SComment]:
    # Internal notes are readable by Reporter and up only (gitlab-org/gitlab#363045).
    role = repo.roles.get(req.user.login, "none") if req.user else "none"
    member = ROLES.index(role) >= ROLES.index("triage") if role in ROLES else False
    return [c for c in thread.comments if member or not c.internal]


def parse_timestamp(value: str) -> datetime:
    parsed = parse_time(value)
    if parsed is None:
        raise HttpError(400, f"invalid timestamp {value!r}")
    return parsed
