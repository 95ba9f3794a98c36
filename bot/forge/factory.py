"""Build the configured forge adapters: the only place that knows both config and adapters."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from bot.config import LabelSettings, Settings
from bot.forge.base import Forge
from bot.forge.github import GitHubForge
from bot.forge.github_app import GitHubApp
from bot.forge.gitlab import GitLabForge
from bot.forge.policy import RequestPolicy
from bot.forge.types import TaskKey
from bot.metrics import Metrics

# From this many repositories on, discovery lists across them (search, group listings) instead
# of one by one, unless the forge says otherwise (`cross_repo_from` on the adapter).
CROSS_REPO_FROM = 3


@dataclass(frozen=True)
class Source:
    """One forge and the repositories (GitHub) or projects (GitLab) to watch on it."""

    forge: Forge
    repos: tuple[str, ...]
    cross_repo_from: int | None = None  # None: the adapter's own threshold
    # Several sources on one platform (a GitHub App's installations): each one resumes only
    # the saved tasks of its own repositories.
    own_repos_only: bool = False

    def cross_repo_threshold(self) -> int:
        if self.cross_repo_from is not None:
            return self.cross_repo_from
        return int(getattr(self.forge, "cross_repo_from", CROSS_REPO_FROM))

    def owns(self, key: TaskKey) -> bool:
        if key.platform is not self.forge.platform:
            return False
        return not self.own_repos_only or key.repo.lower() in {r.lower() for r in self.repos}


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
        if gh.app is not None:
            sources.extend(_app_sources(settings, policy))
        else:
            assert gh.token is not None  # the settings validate one of token or app
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


def _app_sources(settings: Settings, policy: RequestPolicy) -> list[Source]:
    """One source per installation of the GitHub App (or of the configured ones), each with
    its own refreshed token and the installation's repositories (or the configured subset)."""
    gh = settings.github
    assert gh is not None and gh.app is not None
    app = GitHubApp(
        gh.api_url, gh.app.id, gh.app.private_key.get_secret_value(), gh.timeout_seconds
    )
    identity = app.identity()
    sources: list[Source] = []
    for installation_id in gh.app.installations or app.installation_ids():
        installation = app.installation(installation_id, gh.repositories)
        if not installation.repos:
            continue
        forge = GitHubForge(
            gh.api_url,
            "",
            watch_labels=watched_labels(settings.labels),
            timeout=gh.timeout_seconds,
            seconds_between_writes=gh.seconds_between_writes,
            policy=policy,
            auth=installation.auth,
            identity=identity,
        )
        sources.append(Source(forge, installation.repos, own_repos_only=True))
    return sources
