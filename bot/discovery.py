"""One discovery pass over a source: which threads are candidates for work."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.forge.errors import AuthError, ForgeError, RateLimited
from bot.forge.factory import Source
from bot.forge.types import TaskSummary
from bot.log import get_logger

log = get_logger(__name__)


@dataclass
class DiscoveryResult:
    tasks: list[TaskSummary] = field(default_factory=list)
    failed_repos: list[str] = field(default_factory=list)
    retry_after: float | None = None


def discover(source: Source) -> DiscoveryResult:
    """List candidates in every repository of `source`.

    A missing repository or a transient failure costs only that repository this cycle; a rate
    limit ends the pass for the whole host (every further request would be refused); an
    authentication error is raised, because nothing on this source can work.
    """
    result = DiscoveryResult()
    platform = source.forge.platform.value
    for repo in source.repos:
        try:
            found = source.forge.list_tasks(repo)
        except AuthError:
            raise
        except RateLimited as exc:
            result.retry_after = exc.retry_after
            result.failed_repos.extend(source.repos[source.repos.index(repo) :])
            log.warning(
                "discovery_rate_limited",
                platform=platform,
                repo=repo,
                retry_after=round(exc.retry_after, 1),
            )
            break
        except ForgeError as exc:
            result.failed_repos.append(repo)
            log.error(
                "discovery_failed", platform=platform, repo=repo, error=str(exc), status=exc.status
            )
            continue
        for task in found:
            log.info(
                "task_discovered", task=str(task.key), title=task.title, labels=sorted(task.labels)
            )
        result.tasks.extend(found)
    return result
