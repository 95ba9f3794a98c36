"""One discovery pass over a source: which threads are candidates for work."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bot.core.log import get_logger
from bot.forge.base import CrossRepoListing, MentionInbox
from bot.forge.errors import AuthError, ForgeError, RateLimited
from bot.forge.factory import Source
from bot.forge.inbox import Cursors, Recorded
from bot.model.thread import TaskSummary

log = get_logger(__name__)


@dataclass
class DiscoveryResult:
    tasks: list[TaskSummary] = field(default_factory=list)
    failed_repos: list[str] = field(default_factory=list)
    retry_after: float | None = None
    # Settles the inbox items read this cycle (marks read/done, moves the cursor): called by
    # the daemon once the jobs are planned and handed out, with what counts as recorded.
    settle: Callable[[Recorded], None] = field(default=lambda _recorded: None)


def discover(source: Source, cursors: Cursors | None = None) -> DiscoveryResult:
    """List candidates in every repository of `source`.

    With many repositories, one cross-repository listing (search, group listings) replaces the
    per-repository ones; the repositories it cannot cover, or all of them when it fails, are
    listed one by one. Threads where a writer mentioned the bot are added (notifications,
    to-dos, their cursor in `cursors`; nothing in the inbox is settled before
    `DiscoveryResult.settle`). A missing repository or a transient failure costs only that
    repository this cycle; a rate limit ends the pass for the whole host (every further request
    would be refused); an authentication error is raised, because nothing on this source can
    work.
    """
    result = DiscoveryResult()
    repos = list(source.repos)
    forge = source.forge
    if isinstance(forge, CrossRepoListing) and len(repos) >= source.cross_repo_threshold():
        try:
            found, repos = forge.list_tasks_across(source.repos)
            _found(result, found)
        except AuthError:
            raise
        except RateLimited as exc:
            _rate_limited(result, source, repos, exc)
            return result
        except ForgeError as exc:
            log.warning(
                "cross_repo_discovery_failed",
                platform=source.forge.platform.value,
                error=str(exc),
                status=exc.status,
            )
    if not _per_repo(result, source, repos):
        return result
    _mentions(result, source, cursors)
    return result


def _per_repo(result: DiscoveryResult, source: Source, repos: list[str]) -> bool:
    platform = source.forge.platform.value
    for index, repo in enumerate(repos):
        try:
            found = source.forge.list_tasks(repo)
        except AuthError:
            raise
        except RateLimited as exc:
            _rate_limited(result, source, repos[index:], exc)
            return False
        except ForgeError as exc:
            result.failed_repos.append(repo)
            log.error(
                "discovery_failed", platform=platform, repo=repo, error=str(exc), status=exc.status
            )
            continue
        _found(result, found)
    return True


def _mentions(result: DiscoveryResult, source: Source, cursors: Cursors | None) -> None:
    if not isinstance(source.forge, MentionInbox):
        return
    try:
        batch = source.forge.mention_batch(source.repos, cursors)
    except AuthError:
        raise
    except ForgeError as exc:
        # The labelled threads were found. The inbox could not be read: nothing in it was
        # marked read or done and its cursor did not move, so the next read lists it again.
        platform = source.forge.platform.value
        log.warning(
            "mention_discovery_failed", platform=platform, error=str(exc), status=exc.status
        )
        return
    result.settle = batch.commit
    known = {task.key for task in result.tasks}
    for task in batch.tasks:
        log.info("task_mentioned", task=str(task.key), title=task.title)
        if task.key in known:
            result.tasks = [t if t.key != task.key else task for t in result.tasks]
        else:
            result.tasks.append(task)


def _found(result: DiscoveryResult, found: list[TaskSummary]) -> None:
    for task in found:
        labels = sorted(task.labels)
        log.info("task_discovered", task=str(task.key), title=task.title, labels=labels)
    result.tasks.extend(found)


def _rate_limited(
    result: DiscoveryResult, source: Source, repos: list[str], exc: RateLimited
) -> None:
    result.retry_after = exc.retry_after
    result.failed_repos.extend(repos)
    log.warning(
        "discovery_rate_limited",
        platform=source.forge.platform.value,
        repo=repos[0] if repos else "",
        retry_after=round(exc.retry_after, 1),
    )
