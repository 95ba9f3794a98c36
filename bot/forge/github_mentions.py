"""Threads where a writer called the bot on GitHub, from the notifications of its user.

`GET /notifications` lists the threads with news for the user: reason `mention` (or
`team_mention`) when it was @mentioned, `subscribed` for any new comment in a repository the
account watches (docs.github.com/rest/activity/notifications). So a mention is found anywhere,
and a `/bot` without a mention in the repositories the bot's account watches. The answer carries
`Last-Modified`; sent back as `If-Modified-Since` an unchanged list costs a 304 (the documented
way to poll notifications). Each notification read is marked read, so it is handled once; the
comments are read to check that a writer called (a notification does not say who).

Installation tokens of GitHub Apps and fine-grained personal access tokens cannot read
notifications (docs.github.com/rest/activity/notifications: "does not work with GitHub App user
access tokens, GitHub App installation access tokens, or fine-grained personal access tokens";
the answer is 403): then mentions and `/bot` on unlabelled threads arrive only through the
webhook listener, and the labelled threads through the listings or search, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from bot.forge._util import format_time, parse_time
from bot.forge.errors import AuthError, Forbidden
from bot.forge.mentions import calls_bot
from bot.forge.types import Comment, Kind, Permission, Platform, TaskKey, TaskSummary, Thread, User
from bot.log import get_logger

log = get_logger(__name__)
_SUBJECT = re.compile(r"/repos/([^/]+/[^/]+)/(issues|pulls)/(\d+)$")
REASONS = ("mention", "team_mention", "subscribed", "comment", "author", "manual")

Fetch = Callable[[dict[str, Any], dict[str, str]], tuple[dict[str, Any], Any]]


class GitHubMentions:
    def __init__(
        self,
        fetch: Fetch,
        mark_read: Callable[[str], None],
        thread: Callable[[TaskKey], Thread],
        comments: Callable[[TaskKey, datetime | None], list[Comment]],
        permission: Callable[[str, str], Permission],
    ) -> None:
        self._fetch = fetch
        self._mark_read = mark_read
        self._thread = thread
        self._comments = comments
        self._permission = permission
        self._last_modified: str | None = None
        self._since: datetime | None = None
        self._told = False

    def tasks(self, repos: Sequence[str], me: User) -> list[TaskSummary]:
        if me.is_bot or self._told:
            if not self._told:
                self._told = True
                log.info("mentions_via_webhooks_only", reason="app tokens get no notifications")
            return []
        params: dict[str, Any] = {"per_page": 50}
        if self._since is not None:
            params["since"] = format_time(self._since)
        headers = {"If-Modified-Since": self._last_modified} if self._last_modified else {}
        try:
            response_headers, data = self._fetch(params, headers)
        except (AuthError, Forbidden) as exc:
            if exc.status != 403:
                raise
            self._told = True  # a token that may not read notifications: stop asking
            log.warning("mentions_unavailable", error=str(exc))
            return []
        if data is None:  # 304: nothing new
            return []
        self._last_modified = response_headers.get("last-modified") or self._last_modified
        wanted = {r.lower(): r for r in repos}
        found: dict[TaskKey, TaskSummary] = {}
        for note in data:
            self._since = max(self._since or parse_time(None), parse_time(note.get("updated_at")))
            summary = self._summary(note, wanted, me) if note.get("reason") in REASONS else None
            if summary is not None:
                found[summary.key] = summary
            self._mark_read(str(note["id"]))
        return sorted(found.values(), key=lambda s: s.key)

    def _summary(
        self, note: dict[str, Any], wanted: dict[str, str], me: User
    ) -> TaskSummary | None:
        match = _SUBJECT.search(str((note.get("subject") or {}).get("url") or ""))
        if match is None or match.group(1).lower() not in wanted:
            return None
        repo = wanted[match.group(1).lower()]
        kind = Kind.PULL if match.group(2) == "pulls" else Kind.ISSUE
        key = TaskKey(Platform.GITHUB, repo, kind, int(match.group(3)))
        thread = self._thread(key)
        if thread.state != "open" or not self._by_writer(key, thread, note, me):
            return None
        return TaskSummary(
            key=key,
            title=thread.title,
            labels=thread.labels,
            assignees=thread.assignees,
            updated_at=thread.updated_at,
            mentioned=True,
        )

    def _by_writer(self, key: TaskKey, thread: Thread, note: dict[str, Any], me: User) -> bool:
        """A writer's comment (or the thread's own text) mentions the bot or says `/bot`: people
        without write access may not start it."""
        last_read = note.get("last_read_at")
        since = parse_time(last_read) if last_read else None
        comments = self._comments(key, since)
        for comment in comments:
            if comment.author_is_bot or comment.author == me.login:
                continue
            if calls_bot(comment.body, me.login) and comment.permission.can_write:
                return True
        # The thread's own text counts only for a new thread: any later news on an old one
        # would otherwise restart it.
        if since is None and not comments and calls_bot(thread.body, me.login):
            return self._permission(key.repo, thread.author).can_write
        return False
