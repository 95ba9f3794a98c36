"""The seed design as a forge, for baselines: every comment check fetches the comment list
again without `since` or ETags, and only its first page."""

from __future__ import annotations

from datetime import datetime

from bot.forge.github import GitHubForge
from bot.model.thread import Comment, TaskKey


class NaiveGitHubForge(GitHubForge):
    def list_comments(self, key: TaskKey, since: datetime | None = None) -> list[Comment]:
        url = f"/repos/{key.repo}/issues/{key.number}/comments"
        _, data = self._req.requestJsonAndCheck("GET", url, {"per_page": 100})
        return [self._comment(key.repo, item, "conversation") for item in data]
