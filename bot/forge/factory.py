"""Build the configured forge adapters: the only place that knows both config and adapters."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from bot.config import LabelSettings, Settings
from bot.forge.base import Forge
from bot.forge.github import GitHubForge
from bot.forge.gitlab import GitLabForge
from bot.forge.policy import RequestPolicy
from bot.metrics import Metrics


@dataclass(frozen=True)
class Source:
    """One forge and the repositories (GitHub) or projects (GitLab) to watch on it."""

    forge: Forge
    repos: tuple[str, ...]


def watched_labels(labels: LabelSettings) -> tuple[str, ...]:
    # Processing and paused are watched too: a thread labelled so with no state on disk (a
    # lost state dir) is started over instead of being forgotten. Finished threads are
    # watched for a `/bot` from a writer, which hands them back.
    return (
        labels.trigger,
        labels.processing,
        labels.paused,
        labels.done,
        labels.failed,
        labels.stopped,
    )


def build_sources(
    settings: Settings, stop: threading.Event | None = None, metrics: Metrics | None = None
) -> list[Source]:
    stop = stop or threading.Event()
    metrics = metrics or Metrics()

    def observer(platform: str) -> Callable[[str], None]:
        counter = metrics.api_requests
        return lambda outcome: counter.labels(platform, outcome).inc()

    sources: list[Source] = []
    if settings.github is not None:
        gh = settings.github
        policy = RequestPolicy(
            host=urlsplit(gh.api_url).netloc, stop=stop, observe=observer("github")
        )
        forge: Forge = GitHubForge(
            gh.api_url,
            gh.token.get_secret_value(),
            watch_labels=watched_labels(settings.labels),
            timeout=gh.timeout_seconds,
            seconds_between_writes=gh.seconds_between_writes,
            policy=policy,
        )
        sources.append(Source(forge, gh.repositories))
    if settings.gitlab is not None:
        gl = settings.gitlab
        policy = RequestPolicy(host=urlsplit(gl.url).netloc, stop=stop, observe=observer("gitlab"))
        forge = GitLabForge(
            gl.url,
            gl.token.get_secret_value(),
            watch_labels=watched_labels(settings.labels),
            timeout=gl.timeout_seconds,
            policy=policy,
            archives_per_minute=gl.archive_downloads_per_minute,
        )
        sources.append(Source(forge, gl.projects))
    return sources
