"""Threads where a writer called the bot on GitHub, from the notifications of its user.

`GET /notifications` lists the threads with news for the user: reason `mention` (or
`team_mention`) when it was @mentioned, `subscribed` for any new comment in a repository the
account watches, `comment`, `author` or `manual` for threads it commented on, opened or
subscribed to (docs.github.com/rest/activity/notifications, "About notification reasons"). So a
mention is found anywhere, and a `/bot` without a mention in the repositories the bot's account
watches. Other reasons (`review_requested`, `security_alert`, `ci_activity`, `assign`, ...) and
other repositories are not the bot's: those notifications are never marked read, since marking
read "is equivalent to clicking a notification in your notification inbox" and the token may
be a person's.

The list is newest first, at most 50 a page (OpenAPI `per_page`: "max 50"): it is read page by
page to the end, then checked oldest first (`bot.forge.inbox`). The answer carries
`Last-Modified` (sent back as `If-Modified-Since` an unchanged list costs a 304) and
`X-Poll-Interval`, how many seconds to wait before the next request ("Please obey the
header"). The cursor (`since`, `Last-Modified`, the time the next request may be sent) is kept
in the store, so a restart continues where the last read settled and honours the wait. Each
notification is marked read only once its task's start is recorded; a notification whose check
failed stays unread, `since` stays before it and the next read sees it again. The comments are
read to check that a writer called (a notification does not say who).

Installation tokens of GitHub Apps and fine-grained personal access tokens cannot read
notifications (docs.github.com/rest/activity/notifications: "does not work with GitHub App user
access tokens, GitHub App installation access tokens, or fine-grained personal access tokens";
the answer is 403): then mentions and `/bot` on unlabelled threads arrive only through the
webhook listener, and the labelled threads through the listings or search, as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from bot.core.clock import format_time, parse_time
from bot.core.log import get_logger
from bot.forge._util import LRU, next_link
from bot.forge.errors import AuthError, Forbidden, ForgeError, NotFound, RateLimited
from bot.forge.inbox import Checked, Cursors, MemoryCursors, MentionBatch, Outcome, Recorded
from bot.forge.inbox import settled as settled_items
from bot.forge.mentions import calls_bot
from bot.model.thread import Comment, Kind, Permission, Platform, TaskKey, TaskSummary, Thread, User

log = get_logger(__name__)
_SUBJECT = re.compile(r"/repos/([^/]+/[^/]+)/(issues|pulls)/(\d+)$")
REASONS = ("mention", "team_mention", "subscribed", "comment", "author", "manual")
PER_PAGE = 50  # GitHub serves at most 50 notifications a page
# `since` is "updated after the given time", in whole seconds: one second back, so that a
# notification updated in the second the cursor names is listed again, not skipped.
OVERLAP = timedelta(seconds=1)

# (path or next-page URL, query or None, request headers) -> (response headers, body or None)
Fetch = Callable[[str, dict[str, Any] | None, dict[str, str]], tuple[dict[str, Any], Any]]


@dataclass
class _Cursor:
    since: str | None = None
    last_modified: str | None = None  # valid only while everything up to it is settled
    poll_after: float = 0.0  # wall-clock time before which no request is sent

    @classmethod
    def load(cls, text: str | None) -> _Cursor:
        if not text:
            return cls()
        try:
            data = json.loads(text)
            return cls(data.get("since"), data.get("last_modified"), float(data["poll_after"]))
        except (ValueError, TypeError, KeyError, AttributeError):
            log.warning("discovery_cursor_unreadable", cursor="github notifications")
            return cls()  # read from the start: settled notifications are read already

    def dumps(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


class GitHubMentions:
    def __init__(
        self,
        fetch: Fetch,
        mark_read: Callable[[str], None],
        thread: Callable[[TaskKey], Thread],
        comments: Callable[[TaskKey, datetime | None], list[Comment]],
        permission: Callable[[str, str], Permission],
        *,
        api: str,
        clock: Callable[[], float],
    ) -> None:
        self._fetch = fetch
        self._mark_read = mark_read
        self._thread = thread
        self._comments = comments
        self._permission = permission
        self._api = api
        self._clock = clock
        self._memory = MemoryCursors()
        self._interval: int | None = None
        # Notifications (id, updated_at) found to start a task that is not recorded yet: not
        # checked again while they wait (the next read lists them again, unread).
        self._found: LRU[tuple[str, str], TaskSummary] = LRU(4096)
        self._told = False

    def read(self, repos: Sequence[str], me: User, cursors: Cursors | None = None) -> MentionBatch:
        if me.is_bot or self._told:
            if not self._told:
                self._told = True
                log.info("mentions_via_webhooks_only", reason="app tokens get no notifications")
            return MentionBatch()
        cursors = cursors or self._memory
        name = f"github-notifications:{self._api}:{me.login}"
        cursor = _Cursor.load(cursors.discovery_cursor(name))
        if self._clock() < cursor.poll_after:
            return MentionBatch()  # X-Poll-Interval: not yet (the rest of discovery goes on)
        try:
            listed = self._list(cursor, cursors, name)
        except (AuthError, Forbidden) as exc:
            if exc.status != 403:
                raise
            self._told = True  # a token that may not read notifications: stop asking
            log.warning("mentions_unavailable", error=str(exc))
            return MentionBatch()
        if listed is None:  # 304: nothing new
            return MentionBatch()
        notes, last_modified = listed
        checked = self._check_all(notes, {r.lower(): r for r in repos}, me)
        found = {c.summary.key: c.summary for c in checked if c.summary is not None}
        commit = partial(self._commit, cursors, name, cursor, checked, last_modified)
        return MentionBatch(sorted(found.values(), key=lambda s: s.key), commit)

    # -- reading ------------------------------------------------------------------------------

    def _list(
        self, cursor: _Cursor, cursors: Cursors, name: str
    ) -> tuple[list[dict[str, Any]], str | None] | None:
        """Every page, oldest notification first (None: 304). The wait the first answer asks
        for is saved at once: a restart honours it too."""
        params: dict[str, Any] = {"per_page": PER_PAGE}
        if cursor.since:
            params["since"] = cursor.since
        headers = {"If-Modified-Since": cursor.last_modified} if cursor.last_modified else {}
        first, page = self._fetch("/notifications", params, headers)
        self._hold(cursor, first)
        cursors.save_discovery_cursor(name, cursor.dumps())
        if page is None:
            return None
        notes: dict[str, dict[str, Any]] = {}
        following = next_link(first.get("link"))
        while True:
            for note in page or []:
                # A page may repeat an item the previous one had (new ones pushed it down).
                notes[str(note["id"])] = note
            if following is None:
                break
            response, page = self._fetch(following, None, {})
            following = next_link(response.get("link"))
        ordered = sorted(notes.values(), key=lambda n: (parse_time(n.get("updated_at")), n["id"]))
        return ordered, first.get("last-modified")

    def _hold(self, cursor: _Cursor, headers: dict[str, Any]) -> None:
        value = str(headers.get("x-poll-interval") or "")
        if not value.isdigit():
            return
        seconds = int(value)
        cursor.poll_after = self._clock() + seconds
        if seconds != self._interval:
            self._interval = seconds
            log.info("notifications_poll_interval", seconds=seconds)

    def _check_all(
        self, notes: list[dict[str, Any]], wanted: dict[str, str], me: User
    ) -> list[Checked]:
        checked: list[Checked] = []
        for index, note in enumerate(notes):
            try:
                checked.append(self._check(note, wanted, me))
            except RateLimited as exc:
                # Every further request would be refused: this one and the rest wait.
                log.warning(
                    "mention_check_failed",
                    platform="github",
                    error=str(exc),
                    status=exc.status,
                    waiting=len(notes) - index,
                )
                checked += [_failed(n) for n in notes[index:]]
                break
        return checked

    def _check(self, note: dict[str, Any], wanted: dict[str, str], me: User) -> Checked:
        ident, updated = str(note["id"]), str(note.get("updated_at") or "")
        key = _key(note, wanted)
        if key is None or note.get("reason") not in REASONS:
            return Checked(ident, parse_time(updated), Outcome.SKIPPED)
        summary = self._found.get((ident, updated))
        if summary is None:
            try:
                summary = self._summary(key, note, me)
            except (AuthError, RateLimited):
                raise
            except ForgeError as exc:
                if isinstance(exc, NotFound) or exc.status == 410:
                    return Checked(ident, parse_time(updated), Outcome.HANDLED)  # deleted
                log.warning(
                    "mention_check_failed",
                    platform="github",
                    task=str(key),
                    error=str(exc),
                    status=exc.status,
                )
                return _failed(note)
            if summary is not None:
                self._found.put((ident, updated), summary)
        return Checked(ident, parse_time(updated), Outcome.HANDLED, summary)

    def _summary(self, key: TaskKey, note: dict[str, Any], me: User) -> TaskSummary | None:
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

    # -- settling -----------------------------------------------------------------------------

    def _commit(
        self,
        cursors: Cursors,
        name: str,
        cursor: _Cursor,
        checked: list[Checked],
        last_modified: str | None,
        recorded: Recorded,
    ) -> None:
        """Move the cursor up to the first notification not settled, then mark read the
        settled ones (the cursor first: a failed PATCH then costs only an unread notification
        whose task is recorded)."""
        done, first_open = settled_items(checked, recorded)
        if first_open is not None:
            _advance(cursor, first_open.updated_at - OVERLAP)
            cursor.last_modified = None  # a 304 would hide what is left
        else:
            if checked:
                _advance(cursor, max(c.updated_at for c in checked) - OVERLAP)
            cursor.last_modified = last_modified
        cursors.save_discovery_cursor(name, cursor.dumps())
        for index, item in enumerate(done):
            try:
                self._mark_read(item.id)
            except ForgeError as exc:
                log.warning(
                    "mention_settle_failed",
                    platform="github",
                    error=str(exc),
                    status=exc.status,
                    unsettled=len(done) - index,
                )
                return


def _advance(cursor: _Cursor, until: datetime) -> None:
    if cursor.since is None or parse_time(cursor.since) < until:
        cursor.since = format_time(until)


def _failed(note: dict[str, Any]) -> Checked:
    return Checked(str(note["id"]), parse_time(note.get("updated_at")), Outcome.FAILED)


def _key(note: dict[str, Any], wanted: dict[str, str]) -> TaskKey | None:
    """The issue or pull request of a watched repository the notification is about."""
    match = _SUBJECT.search(str((note.get("subject") or {}).get("url") or ""))
    if match is None or match.group(1).lower() not in wanted:
        return None
    kind = Kind.PULL if match.group(2) == "pulls" else Kind.ISSUE
    return TaskKey(Platform.GITHUB, wanted[match.group(1).lower()], kind, int(match.group(3)))
