"""Which commit a task works from, and which branch its change request targets."""

from __future__ import annotations

from bot.forge.base import Forge
from bot.forge.errors import EmptyRepository
from bot.forge.types import Thread


def pin(forge: Forge, thread: Thread, continue_branch: str | None = None) -> tuple[str, str]:
    """(commit sha, target branch).

    Handed back after a finished run: the head of that run's branch. A PR/MR: its head.
    An issue: the default branch's head. Follow-ups on a PR/MR of the same repository target
    that request's branch; everything else targets the base (or default) branch.
    """
    repo = thread.key.repo
    continuing = forge.resolve_branch(repo, continue_branch) if continue_branch else None
    if continuing is not None:
        sha = continuing.sha
    elif thread.key.is_change_request and thread.head_sha:
        sha = thread.head_sha
    else:
        head = forge.resolve_branch(repo, forge.default_branch(repo))
        if head is None:
            raise EmptyRepository(f"{repo}: the default branch has no commit")
        sha = head.sha
    if thread.key.is_change_request and thread.head_repo == repo and thread.head_ref:
        target = thread.head_ref
    else:
        target = thread.base_ref or forge.default_branch(repo)
    return sha, target
