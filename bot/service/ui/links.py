"""Links from the page to the forges: a task's thread, and which addresses may be links.

The thread's address is made from the configuration, as the forges make theirs: GitHub's web
host is the API's without `api.` (github.com) or without `/api/v3` (GitHub Enterprise Server,
docs.github.com/en/enterprise-server@latest/rest/quickstart: `http(s)://HOSTNAME/api/v3`);
GitLab's `url` is its web address (`/-/issues/N`, `/-/merge_requests/N`).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from bot.core.config import Settings
from bot.model.thread import Kind, Platform, TaskKey

_PATHS = {
    (Platform.GITHUB, Kind.ISSUE): "issues",
    (Platform.GITHUB, Kind.PULL): "pull",
    (Platform.GITLAB, Kind.ISSUE): "-/issues",
    (Platform.GITLAB, Kind.MERGE_REQUEST): "-/merge_requests",
}


@dataclass(frozen=True)
class ForgeLinks:
    """Each configured forge's web address (None: not configured)."""

    github: str | None = None
    gitlab: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ForgeLinks:
        return cls(
            github=github_web(settings.github.api_url) if settings.github else None,
            gitlab=settings.gitlab.url.rstrip("/") if settings.gitlab else None,
        )

    def thread(self, key: TaskKey) -> str | None:
        web = self.github if key.platform is Platform.GITHUB else self.gitlab
        section = _PATHS.get((key.platform, key.kind))
        if web is None or section is None:
            return None
        return href(f"{web}/{quote(key.repo, safe='/')}/{section}/{key.number}")


def github_web(api_url: str) -> str:
    """GitHub's web address for its REST API's."""
    url = api_url.rstrip("/")
    parts = urlsplit(url)
    if parts.hostname == "api.github.com":
        return f"{parts.scheme}://github.com"
    return url.removesuffix("/api/v3")


def href(url: str | None) -> str | None:
    """`url` if it may be a link: http or https only, so an address a forge sent cannot be a
    `javascript:` or `data:` link (escaping keeps it in its attribute, not off its scheme)."""
    if not url:
        return None
    scheme = urlsplit(url.strip()).scheme.lower()
    return url.strip() if scheme in ("http", "https") else None
