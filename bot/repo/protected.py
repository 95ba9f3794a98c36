"""Paths the agent may not change: CI definitions by default.

A pushed workflow runs with the repository's secrets and the bot's token, so a model steered
by an outsider's text could otherwise turn a pull request into code execution. The patterns
come from `agent.protected_paths`; `agent.allow_protected_paths` lifts them per repository.

Pattern syntax: `**` spans directories, `*` and `?` stay within one path segment, and a
pattern also covers everything under it (`.github/workflows` protects the whole folder).
Matching ignores case, so `.GitHub/Workflows/x.yml` is refused as well.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from dataclasses import dataclass
from functools import lru_cache

from bot.core.config import AgentSettings


@dataclass(frozen=True)
class PathGuard:
    protected: tuple[str, ...]
    allowed: tuple[str, ...] = ()

    @classmethod
    def for_repo(cls, settings: AgentSettings, repo: str) -> PathGuard:
        allowances = {name.lower(): v for name, v in settings.allow_protected_paths.items()}
        return cls(settings.protected_paths, allowances.get(repo.lower(), ()))

    def refusal(self, path: str) -> str | None:
        """Why `path` (normalised, relative) may not be changed; None when it may."""
        hit = next((p for p in self.protected if matches(p, path)), None)
        if hit is None or any(matches(p, path) for p in self.allowed):
            return None
        return (
            f"error: {path} is protected (it matches {hit!r} in agent.protected_paths, e.g. a "
            "CI definition) and this repository's configuration does not allow the bot to "
            "change it; leave it as it is and describe the change it needs in your answer"
        )

    def withhold(self, changes: MutableMapping[str, str | None]) -> list[str]:
        """Remove protected paths from a changeset; returns the paths removed."""
        refused = [path for path in changes if self.refusal(path) is not None]
        for path in refused:
            del changes[path]
        return refused


# With no configuration at all (a Workspace built without a guard), CI stays protected.
DEFAULT_GUARD = PathGuard(AgentSettings().protected_paths)


def matches(pattern: str, path: str) -> bool:
    return _compile(pattern).fullmatch(path.lower()) is not None


@lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    parts: list[str] = []
    text = pattern.strip().strip("/").lower()
    i = 0
    while i < len(text):
        if text.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
        elif text.startswith("**", i):
            parts.append(".*")
            i += 2
        else:
            parts.append({"*": "[^/]*", "?": "[^/]"}.get(text[i], re.escape(text[i])))
            i += 1
    return re.compile("".join(parts) + "(?:/.*)?", re.DOTALL)
