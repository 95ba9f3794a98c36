"""Which setup and check commands a repository gets.

The daemon's configuration (`jail.repositories`) wins; otherwise `.coding-agent.yml` in the
repository, read by the same rule as the agent instruction files: from the default branch, or
from a request's head only when its author has write access. A contributor without write access
cannot make the bot run their commands by committing that file.
"""

from __future__ import annotations

from collections.abc import Callable

import yaml
from pydantic import ValidationError

from bot.core.config import JailSettings, RepoChecks
from bot.core.log import get_logger

log = get_logger(__name__)
REPO_FILE = ".coding-agent.yml"


def checks_for(
    settings: JailSettings, repo: str, read_trusted: Callable[[str], str | None]
) -> RepoChecks:
    for name, configured in settings.repositories.items():
        if name.lower() == repo.lower():
            return configured
    text = read_trusted(REPO_FILE)
    if text is None:
        return RepoChecks()
    try:
        found = RepoChecks.model_validate(yaml.safe_load(text) or {})
    except (yaml.YAMLError, ValidationError, TypeError) as exc:
        first = str(exc).splitlines()[0][:200]
        log.warning("repo_checks_invalid", repo=repo, file=REPO_FILE, error=first)
        return RepoChecks()
    if found.setup_network and not settings.allow_repo_setup_network:
        # The network is the operator's to give: a repository file cannot open it alone.
        log.warning("repo_setup_network_refused", repo=repo, file=REPO_FILE)
        return found.model_copy(update={"setup_network": False})
    return found
