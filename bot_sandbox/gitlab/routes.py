"""Every GitLab route, in the order the server tries them (no two of them match one path)."""

from __future__ import annotations

import re

from bot_sandbox.gitlab import (
    archives,
    commits,
    compare,
    discussions,
    files,
    issuables,
    labels,
    listings,
    notes,
    projects,
    repository,
    todos,
    users,
)
from bot_sandbox.gitlab.lookup import project_of
from bot_sandbox.http import Route, bind, read_only_when_archived
from bot_sandbox.site import Site

# Everything under `/projects/:id` that an archived project makes read-only.
PROJECT = (
    projects.ENDPOINTS
    + issuables.ENDPOINTS
    + notes.ENDPOINTS
    + labels.ENDPOINTS
    + discussions.ENDPOINTS
    + files.ENDPOINTS
    + repository.ENDPOINTS
    + archives.ENDPOINTS
    + commits.ENDPOINTS
    + compare.ENDPOINTS
)
ELSEWHERE = listings.ENDPOINTS + todos.ENDPOINTS + labels.PROJECT_LABELS


def routes(site: Site) -> list[Route]:
    def archived(m: re.Match[str]) -> bool:
        return project_of(site.world, m).archived

    # An archived project is read-only: writes are refused with 403
    # (https://docs.gitlab.com/user/project/working_with_projects/#archive-a-project).
    guarded = read_only_when_archived(bind(site, PROJECT), "project", archived, "403 Forbidden")
    return bind(site, users.ENDPOINTS) + guarded + bind(site, ELSEWHERE)
