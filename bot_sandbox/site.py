"""What the routes may use of the server that serves them: the world, and what the forges keep
beside it. `ForgeServer` is one; a route never sees its HTTP machinery, faults or request log,
and never imports the server (the server imports the routes)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from bot_sandbox.archives import ArchiveLinks
from bot_sandbox.github_app import AppEmulator
from bot_sandbox.inbox import SNotification, STodo
from bot_sandbox.search_limit import SearchLimit
from bot_sandbox.world import World


class Site(Protocol):
    world: World
    # Archives (github/archives.py, gitlab/archives.py).
    archive_links: ArchiveLinks
    archive_host: str  # "codeload" (github.com) or "same" (GitHub Enterprise Server)

    @property
    def codeload_url(self) -> str: ...

    def take_gitlab_archive(self, login: str) -> bool: ...

    # GitHub search (github/search.py) and the GitHub App (github/installations.py).
    search_limit: SearchLimit
    github_app: AppEmulator | None
    # Notifications and To-Do items (mentions.py fills them; github/notifications.py and
    # gitlab/todos.py serve them).
    notifications: dict[str, list[SNotification]]
    notifications_served: dict[str, datetime]  # login -> Last-Modified sent
    notifications_poll_interval: int
    todos: dict[str, list[STodo]]
    watchers: dict[str, set[str]]  # GitHub repository -> logins watching it
    # Repository labels (github/labels.py, gitlab/labels.py).
    repo_labels: dict[str, set[str]]  # "platform:path" -> labels that exist there
    labels_created: list[tuple[str, str, str]]  # (platform, repo, name)
