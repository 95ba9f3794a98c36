"""Every GitHub route, in the order the server tries them (no two of them match one path)."""

from __future__ import annotations

import re

from bot_sandbox.github import (
    archives,
    comments,
    compare,
    git_commits,
    git_refs,
    git_trees,
    installations,
    issues,
    labels,
    notifications,
    pulls,
    repos,
    reviews,
    search,
    users,
)
from bot_sandbox.github.lookup import repo_of
from bot_sandbox.http import Route, bind, read_only_when_archived
from bot_sandbox.site import Site

# The routes whose writes an archived repository refuses (every write among them is under
# `/repos/{owner}/{name}`).
REPOSITORY = (
    users.ENDPOINTS
    + repos.ENDPOINTS
    + issues.ENDPOINTS
    + comments.ENDPOINTS
    + labels.ENDPOINTS
    + pulls.ENDPOINTS
    + comments.REVIEW_COMMENTS
    + reviews.ENDPOINTS
    + archives.ENDPOINTS
    + git_refs.ENDPOINTS
    + git_commits.ENDPOINTS
    + git_trees.ENDPOINTS
    + compare.ENDPOINTS
)
ELSEWHERE = (
    search.ENDPOINTS + notifications.ENDPOINTS + labels.REPO_LABELS + installations.ENDPOINTS
)


def routes(site: Site) -> list[Route]:
    def archived(m: re.Match[str]) -> bool:
        return repo_of(site.world, m).archived

    # An archived repository is read-only: every write is a 403 with this message
    # (https://docs.github.com/en/repositories/archiving-a-github-repository/archiving-repositories).
    message = "Repository was archived so is read-only."
    guarded = read_only_when_archived(bind(site, REPOSITORY), "owner", archived, message)
    return guarded + bind(site, ELSEWHERE)


def codeload_routes(site: Site) -> list[Route]:
    """The archive host github.com redirects to (another host than the API's)."""
    return bind(site, archives.CODELOAD)
