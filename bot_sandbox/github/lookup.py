"""Finding what a GitHub path names (the repository, the issue or pull request in it), and
whether the caller may push there."""

from __future__ import annotations

import re

from bot_sandbox.http import HttpError, Request
from bot_sandbox.world import SRepo, SThread, World

REPO = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"


def repo_of(world: World, match: re.Match[str]) -> SRepo:
    key = ("github", f"{match['owner']}/{match['name']}")
    if key not in world.repos:
        raise HttpError(404, "Not Found")
    return world.repos[key]


def thread_of(repo: SRepo, number: str, kinds: tuple[str, ...] = ("issue", "pull")) -> SThread:
    for kind in kinds:
        thread = repo.thread(kind, int(number))
        if thread is not None:
            return thread
        if (kind, int(number)) in repo.deleted:
            # "If the issue was deleted from a repository where the authenticated user has
            # read access, the API returns a 410 Gone status." (REST docs, Get an issue)
            raise HttpError(410, "This issue was deleted")
    raise HttpError(404, "Not Found")


def head_repo_of(world: World, thread: SThread) -> SRepo | None:
    return world.repos.get(("github", thread.head_repo)) if thread.head_repo else None


def refuse_push(world: World, repo: SRepo, branch: str | None, req: Request) -> None:
    """Writes to a fork by someone who may not push there. GitHub hides what a token may
    not write to behind 404 (403 "Resource not accessible by ..." for tokens limited to
    other repositories); either way the write is refused."""
    assert req.user is not None
    if repo.fork_of is None:
        return
    login = req.user.login
    allowed = (
        world.may_push(repo, branch, login)
        if branch is not None
        else any(world.may_push(repo, b, login) for b in repo.branches)
    )
    if not allowed:
        raise HttpError(404, "Not Found")
