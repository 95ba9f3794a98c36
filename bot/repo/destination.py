"""Where the bot's work goes: a branch of the task's repository, the request's branch in a
fork, or a patch in the thread (docs/architecture.md, invariant 13).

Nothing the bot did not write reaches a branch of the task's repository. A pull/merge request
whose head comes from outside (it lives in a fork, or its author has no write access) is never
used as the base of a new branch there: a push to a new branch runs that repository's `push`
workflows and branch pipelines, with its secrets, over every file the head brings (the
`pull_request_target` hole). For such a request the bot does what people do for a community
branch: it pushes its own commit to the request's branch in the fork when the fork's owner
allows maintainers to (GitHub `maintainer_can_modify`, GitLab `allow_collaboration`), and
otherwise answers with its change as a patch.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bot.core.config import AgentSettings
from bot.model.state import TaskState
from bot.model.thread import Kind, Platform, TaskKey, Thread


class Where(StrEnum):
    NEW_BRANCH = "new_branch"  # a branch of the task's repository, with a request from it
    OWN_BRANCH = "own_branch"  # the request's own branch, in the task's repository
    FORK_BRANCH = "fork_branch"  # the request's branch in the contributor's fork
    PATCH = "patch"  # nothing pushed: the change as a patch in the thread


@dataclass(frozen=True)
class Destination:
    where: Where
    repo: str  # the repository the branch is in
    branch: str | None  # None for a patch
    why_patch: str = ""  # for a patch: why nothing was pushed, for the people in the thread


def head_from_outside(thread: Thread, author_trusted: bool) -> bool:
    """Whether a request's head may carry commits by people without write access: it lives in
    another repository (a fork, or one the forge no longer knows), or its author has none."""
    if thread.key.kind is Kind.ISSUE:
        return False
    return thread.head_repo != thread.key.repo or not author_trusted


def branch_name(key: TaskKey, slug: str, settings: AgentSettings) -> str:
    return f"{settings.branch_prefix}{key.number}-{slug}"


def choose(
    thread: Thread, state: TaskState, settings: AgentSettings, outside: bool, new_branch: str
) -> Destination:
    """The destination of this run's commit. A branch chosen earlier in the run (saved in the
    state before the first push) is kept, so a repeat after a crash goes to the same place."""
    repo = thread.key.repo
    if state.branch is not None:
        where = Where(state.branch_kind) if state.branch_kind else _legacy_kind(thread, state)
        # A new branch from an outside head is never kept, whatever an older state says.
        if not (outside and where is Where.NEW_BRANCH):
            return Destination(where, state.branch_repo or repo, state.branch)
    if thread.key.kind is Kind.ISSUE:
        return Destination(Where.NEW_BRANCH, repo, new_branch)
    head = thread.head_ref
    if not outside:
        if settings.push_to_existing_branches and head:
            return Destination(Where.OWN_BRANCH, repo, head)
        return Destination(Where.NEW_BRANCH, repo, new_branch)
    if thread.head_repo == repo and head and settings.push_to_existing_branches:
        # The branch is already in this repository (only writers push there): the bot's
        # commit on it brings nothing new from outside.
        return Destination(Where.OWN_BRANCH, repo, head)
    if thread.head_repo and thread.head_repo != repo and head and thread.maintainer_can_modify:
        return Destination(Where.FORK_BRANCH, thread.head_repo, head)
    return Destination(Where.PATCH, repo, None, why_patch(thread, settings))


def why_patch(thread: Thread, settings: AgentSettings) -> str:
    """Why a request's change comes as a patch, and how a person lets the bot push next time."""
    if thread.head_repo is None:
        return "the repository this request comes from is no longer there"
    if thread.head_repo == thread.key.repo:
        return (
            "I push only my own commits to this repository, and this request's branch is not "
            "mine to push to here (`agent.push_to_existing_branches` is off)"
        )
    setting = (
        '"Allow edits by maintainers"'
        if thread.key.platform is Platform.GITHUB
        else '"Allow commits from members who can merge to the target branch"'
    )
    return (
        f"this request comes from the fork `{thread.head_repo}`, and I never push a fork's "
        "commits to this repository; its author has not allowed maintainers to push to its "
        f"branch. To let me push my commit there next time, its author can turn on {setting} "
        "on the request"
    )


def _legacy_kind(thread: Thread, state: TaskState) -> Where:
    """States saved before destinations were recorded: the request's own branch or a new one.
    Only a request from this repository has its own branch here: a fork's branch of the same
    name (`main`, or one the old code pushed upstream) is not the bot's to push to."""
    same_repo = thread.head_repo == thread.key.repo
    own = thread.key.kind is not Kind.ISSUE and same_repo and state.branch == thread.head_ref
    return Where.OWN_BRANCH if own else Where.NEW_BRANCH
