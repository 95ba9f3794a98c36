"""Build the configured forge adapters: the only place that knows both config and adapters."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.config import LabelSettings, Settings
from bot.core.metrics import Metrics
from bot.forge.base import CrossRepoListing, Forge
from bot.forge.github import GitHubForge
from bot.forge.github_app import GitHubApp, Installation
from bot.forge.gitlab import GitLabForge
from bot.forge.policy import RequestPolicy
from bot.model.thread import TaskKey, User

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
    installation: int | None = None  # a GitHub App's installation id
    # The app's installations, read again by the daemon's refresh (one object for all sources).
    app: AppInstallations | None = field(default=None, compare=False, repr=False)

    def cross_repo_threshold(self) -> int:
        if self.cross_repo_from is not None:
            return self.cross_repo_from
        if isinstance(self.forge, CrossRepoListing):
            return self.forge.cross_repo_from
        return CROSS_REPO_FROM

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
    settings: Settings,
    stop: threading.Event | None = None,
    metrics: Metrics | None = None,
    wall_clock: Callable[[], float] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> list[Source]:
    """`clock`: the daemon's; its monotonic time paces the requests (waits, rate-limit gates).
    `wall_clock`: the forges' wall clock (rate-limit resets, the notifications' poll interval),
    `clock.time` unless a test moves it on its own."""
    stop = stop or threading.Event()
    metrics = metrics or Metrics()
    wall_clock = wall_clock or clock.time
    sources: list[Source] = []
    if settings.github is not None:
        gh = settings.github
        policy = _policy(gh.api_url, "github", stop, metrics, clock)
        if gh.app is not None:
            app = AppInstallations(settings, policy, wall_clock)
            sources.extend(app.source(installation) for installation in app.read())
        else:
            assert gh.token is not None  # the settings validate one of token or app
            forge: Forge = GitHubForge(
                gh.api_url,
                gh.token.get_secret_value(),
                watch_labels=watched_labels(settings.labels),
                timeout=gh.timeout_seconds,
                seconds_between_writes=gh.seconds_between_writes,
                policy=policy,
                wall_clock=wall_clock,
            )
            sources.append(Source(forge, gh.repositories))
    if settings.gitlab is not None:
        gl = settings.gitlab
        forge = GitLabForge(
            gl.url,
            gl.token.get_secret_value(),
            watch_labels=watched_labels(settings.labels),
            timeout=gl.timeout_seconds,
            policy=_policy(gl.url, "gitlab", stop, metrics, clock),
            wall_clock=wall_clock,
            archives_per_minute=gl.archive_downloads_per_minute,
        )
        sources.append(Source(forge, gl.projects))
    return sources


def build_app(
    settings: Settings,
    stop: threading.Event | None = None,
    metrics: Metrics | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> AppInstallations | None:
    """The configured GitHub App's installations, for a daemon whose sources carry none (it
    started while the app had no installation with a repository to watch)."""
    gh = settings.github
    if gh is None or gh.app is None:
        return None
    policy = _policy(gh.api_url, "github", stop or threading.Event(), metrics or Metrics(), clock)
    return AppInstallations(settings, policy, clock.time)


def _policy(
    url: str, platform: str, stop: threading.Event, metrics: Metrics, clock: Clock
) -> RequestPolicy:
    counter = metrics.api_requests
    observe: Callable[[str], None] = lambda outcome: counter.labels(platform, outcome).inc()  # noqa: E731
    return RequestPolicy(
        host=urlsplit(url).netloc, stop=stop, clock=clock.monotonic, observe=observe
    )


class AppInstallations:
    """A GitHub App's installations (or the configured ones) and their repositories (or the
    configured subset), read at start and again by the daemon's refresh
    (`github.app.refresh_minutes`). One source per installation, with its own refreshed token."""

    def __init__(
        self,
        settings: Settings,
        policy: RequestPolicy,
        wall_clock: Callable[[], float] = SYSTEM_CLOCK.time,
    ) -> None:
        gh = settings.github
        assert gh is not None and gh.app is not None
        self._settings = settings
        self._policy = policy
        self._wall_clock = wall_clock  # each installation's forge: rate-limit resets
        self._app = GitHubApp(
            gh.api_url, gh.app.id, gh.app.private_key.get_secret_value(), gh.timeout_seconds
        )
        self._identity: User | None = None

    def read(self) -> list[Installation]:
        """The installations with a repository to watch (raises ForgeError)."""
        gh = self._settings.github
        assert gh is not None and gh.app is not None
        listed = self._app.installation_ids()
        # A configured installation the app no longer has (uninstalled) is not watched, as a
        # removed one is not: reading it would fail every time (no token for it).
        ids = [i for i in gh.app.installations if i in listed] if gh.app.installations else listed
        found = [self._app.installation(i, gh.repositories) for i in ids]
        if self._identity is None:  # every request here: `source` then cannot fail
            self._identity = self._app.identity()
        return [installation for installation in found if installation.repos]

    def source(self, installation: Installation) -> Source:
        gh = self._settings.github
        assert gh is not None
        assert self._identity is not None, "read() first"
        forge = GitHubForge(
            gh.api_url,
            "",
            watch_labels=watched_labels(self._settings.labels),
            timeout=gh.timeout_seconds,
            seconds_between_writes=gh.seconds_between_writes,
            policy=self._policy,
            auth=installation.auth,
            identity=self._identity,
            wall_clock=self._wall_clock,
        )
        return Source(
            forge,
            installation.repos,
            own_repos_only=True,
            installation=installation.id,
            app=self,
        )
