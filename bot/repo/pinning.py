"""Which commit a task works from, and which branch its change request targets."""

from __future__ import annotations

from bot.forge.base import Forge
from bot.forge.errors import EmptyRepository
from bot.model.thread import Thread


def pin(
    forge: Forge, thread: Thread, continue_branch: str | None = None, *, outside: bool = True
) -> tuple[str, str]:
    """(commit sha, target branch).

    Handed back after a finished run: the head of that run's branch (of the task's own
    repository). A PR/MR: its head; always so when the head comes from `outside`
    (destination.head_from_outside), whose branch may live in a fork. An issue: the default
    branch's head. Follow-ups on a PR/MR of the same repository target that request's branch;
    everything else targets the base (or default) branch.
    """
    repo = thread.key.repo
    if thread.key.is_change_request and outside:
        continue_branch = None
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
