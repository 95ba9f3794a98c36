"""What a forge error means for a task: classified once, here, at the boundary of a run.

- transient (5xx, timeouts, connection resets, 408/409, 429 and secondary rate limits): the
  task is retried at a later poll, with exponential backoff and jitter; the count of
  consecutive failed runs is saved in the task state and capped;
- permanent (every other 4xx: 403 that is not a rate limit, 404, 422; an empty repository):
  retried once (a race may explain one), then the task ends `failed` with one comment saying
  what failed and what a person can do.

A failed run that made progress does not count: the counter is reset by every model reply.
Nothing retries forever, not even the closing comment of a task that already ended.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from bot.core.clock import SYSTEM_CLOCK, format_time, parse_time
from bot.core.log import get_logger
from bot.forge.errors import (
    EmptyRepository,
    Forbidden,
    ForgeError,
    NotFound,
    RateLimited,
    TransientError,
)
from bot.model.state import TaskState

log = get_logger(__name__)

TRANSIENT_ATTEMPTS = 10  # consecutive failed runs before a transient fault fails the task
PERMANENT_ATTEMPTS = 2
FREE_RETRIES = 1  # the first failure is retried at the next poll, without waiting
BACKOFF_CAP = 3600.0

# What the adapters call each request (`RequestPolicy` operation), in words for people.
_OPERATIONS = {
    "open_pull": "opening the pull request",
    "open_mr": "opening the merge request",
    "find_mr": "looking for the merge request",
    "create_tree": "pushing the changes",
    "create_commit": "pushing the changes",
    "create_ref": "creating the branch",
    "update_ref": "updating the branch",
    "commit": "pushing the changes",
    "post_comment": "posting a comment",
    "edit_comment": "editing my comment",
    "add_labels": "changing labels",
    "remove_label": "changing labels",
    "update_labels": "changing labels",
    "archive": "downloading the repository",
    "archive_link": "downloading the repository",
}
_AGAIN = "then add the trigger label again"


class Kind(StrEnum):
    TRANSIENT = "transient"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class Failure:
    kind: Kind
    event: str  # the log event: named after what happened
    advice: str  # what a person can do (permanent failures)


def classify(exc: ForgeError) -> Failure:
    text = str(exc).lower()
    if isinstance(exc, EmptyRepository):  # GitHub says so with a 409: not a conflict to retry
        return Failure(
            Kind.PERMANENT,
            "repository_empty",
            f"The repository has no commit yet. Push a first commit to its default branch, "
            f"{_AGAIN}.",
        )
    if isinstance(exc, TransientError | RateLimited) or exc.status in (408, 409, 429):
        event = "forge_rate_limited" if isinstance(exc, RateLimited) else "forge_server_error"
        return Failure(Kind.TRANSIENT, event, "")
    if exc.status is not None and exc.status >= 500:
        return Failure(Kind.TRANSIENT, "forge_server_error", "")
    if "draft pull requests are not supported" in text:
        return Failure(
            Kind.PERMANENT,
            "forge_drafts_unsupported",
            "This repository does not support draft pull requests (GitHub offers them in "
            "private repositories only on paid plans). Enable them, or set "
            f"`agent.draft_change_requests: false` in the bot's configuration to open ordinary "
            f"pull requests; {_AGAIN}.",
        )
    if "archived" in text:
        return Failure(
            Kind.PERMANENT,
            "forge_repository_archived",
            f"The repository is archived (read-only). Unarchive it, {_AGAIN}.",
        )
    if "protected branch" in text or "not allowed to push" in text:
        return Failure(
            Kind.PERMANENT,
            "forge_branch_protected",
            "The branch is protected against my pushes. Allow the bot's account to push to "
            f"its branches (`agent.branch_prefix`), {_AGAIN}.",
        )
    if "rule" in text and exc.status == 422:
        return Failure(
            Kind.PERMANENT,
            "forge_rule_violation",
            f"A repository rule refused the change. Adjust the rule for the bot's branches, "
            f"{_AGAIN}.",
        )
    if isinstance(exc, Forbidden):
        return Failure(
            Kind.PERMANENT,
            "forge_forbidden",
            "The bot's account lacks a permission for this. Give it write access to issues, "
            f"pull/merge requests and contents (GitLab: Developer), {_AGAIN}.",
        )
    if isinstance(exc, NotFound):
        return Failure(
            Kind.PERMANENT,
            "forge_not_found",
            f"Something I needed no longer exists or is hidden from my token. Check it, {_AGAIN}.",
        )
    return Failure(Kind.PERMANENT, "forge_request_rejected", f"Check the error above, {_AGAIN}.")


def backoff(attempt: int, base: float, rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before the next run after `attempt` consecutive failures: none for the
    first FREE_RETRIES, then doubling from `base` up to BACKOFF_CAP, with jitter (half to
    all of it) so that tasks failing together do not come back together."""
    if attempt <= FREE_RETRIES or base <= 0:
        return 0.0
    ceiling = min(BACKOFF_CAP, base * 2 ** (attempt - FREE_RETRIES - 1))
    return float(ceiling / 2 + rng() * ceiling / 2)


def waiting(state: TaskState, now: datetime | None = None) -> bool:
    """Is the task backing off (not to be run this poll)? `now`: the caller's clock (default:
    the system's)."""
    if state.retry_at is None:
        return False
    return parse_time(state.retry_at) > (now or SYSTEM_CLOCK.now())


def comment(failure: Failure, exc: ForgeError) -> str:
    doing = _OPERATIONS.get(exc.operation or "", "a request to the forge")
    return f"I could not finish this task: {doing} failed ({exc}).\n\n{failure.advice}"


def settle(
    exc: ForgeError,
    state: TaskState,
    save: Callable[[], None],
    fail: Callable[[str], None],
    base: float,
    now: datetime | None = None,
) -> bool:
    """Record a run that ended on `exc`; True if the task was ended `failed` now.

    `fail` ends the task with the given comment (status saved before it is posted). `now`:
    the caller's clock, from which `retry_at` is counted (default: the system's).
    """
    failure = classify(exc)
    state.forge_failures += 1
    attempt = state.forge_failures
    cap = TRANSIENT_ATTEMPTS if failure.kind is Kind.TRANSIENT else PERMANENT_ATTEMPTS
    fields = {"error": str(exc), "status": exc.status, "operation": exc.operation}
    delay = backoff(attempt, base)
    if isinstance(exc, RateLimited):
        delay = max(delay, exc.retry_after)
    moment = now or SYSTEM_CLOCK.now()
    state.retry_at = format_time(moment + timedelta(seconds=delay)) if delay else None
    if attempt < cap:
        save()
        log.warning(
            failure.event, kind=failure.kind.value, attempt=attempt, retry_in=round(delay), **fields
        )
        return False
    state.retry_at = None
    if state.status.terminal:
        # Only the closing comment or label was owed. Give up on it at the cap, so that an
        # archived repository does not get the same refused post every poll.
        log.error("task_closing_abandoned", cause=failure.event, attempt=attempt, **fields)
        state.pending_post = None
        state.labels_applied = state.status.value
        save()
        return False
    log.error(failure.event, kind=failure.kind.value, attempt=attempt, then="failed", **fields)
    text = comment(failure, exc)
    log.error("task_failed", reason=text.splitlines()[0])
    try:
        fail(text)
    except ForgeError as again:  # the comment or the label could not be written either
        log.error("task_failure_unreported", error=str(again), status=again.status)
    return True
