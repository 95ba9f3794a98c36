"""Notifications (GitHub) and To-Do items (GitLab) for users a comment mentions.

GitHub notifies a mentioned user with reason `mention`
(docs.github.com/account-and-profile/.../about-notifications, "Notification reasons"); GitLab
creates a To-Do with action `mentioned`, or `directly_addressed` when the mention starts the
comment (docs.gitlab.com/user/todos, "Actions that create to-do items").

GitHub keeps one notification thread per issue or pull request and user ("Notifications are
returned as threads", docs.github.com/rest/activity/notifications): news on it makes it unread
again with a new `updated_at`. Its `reason` says why the user gets it, not what the news was
(GitHawkApp/GitHawk#491), and a mention changes it ("if you comment on an issue and then you are
directly mentioned by somebody else the reason will change from 'comment' to 'mention'",
octobox/octobox#187); other news keeps the reason the thread has.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from bot_sandbox.inbox import SNotification, STodo
from bot_sandbox.site import Site
from bot_sandbox.world import SComment, SRepo, SThread

_MENTION = re.compile(r"(?<![\w`])@([A-Za-z0-9][A-Za-z0-9_.\-]*(?:\[bot\])?)")


def notify(
    server: Site, login: str, repo: SRepo, thread: SThread, reason: str, at: datetime
) -> SNotification:
    """News for `login` on `thread`: its notification thread, new or unread again."""
    with server.world.lock:
        served = server.notifications_served.get(login)
        if served is not None and at <= served:
            at = served + timedelta(seconds=1)  # HTTP dates have whole seconds
        notes = server.notifications.setdefault(login, [])
        for note in notes:
            if note.repo is repo and note.thread is thread:
                note.unread = True
                note.updated_at = max(note.updated_at, at)
                if reason in ("mention", "team_mention"):
                    note.reason = reason
                return note
        note = SNotification(server.world.next_id(), repo, thread, reason, at)
        notes.append(note)
        return note


def watch(server: Site) -> None:
    def on_comment(repo: SRepo, thread: SThread, comment: SComment) -> None:
        if comment.system:
            return
        called = mentioned(comment.body)
        if repo.platform == "github":
            # Watching a repository: a notification (reason `subscribed`) for every comment.
            logins = {login for _, login in called}
            for watcher in server.watchers.get(repo.path, set()) - logins:
                if watcher != comment.author.login:
                    notify(server, watcher, repo, thread, "subscribed", comment.created_at)
        for position, login in called:
            # An app is mentioned by its slug; its bot user is `<slug>[bot]`.
            user = server.world.users.get(login) or server.world.users.get(f"{login}[bot]")
            if user is None or user.login == comment.author.login:
                continue
            if repo.platform == "github":
                notify(server, user.login, repo, thread, "mention", comment.created_at)
            else:
                action = "directly_addressed" if position == 0 else "mentioned"
                server.todos.setdefault(user.login, []).append(
                    STodo(server.world.next_id(), repo, thread, action, comment)
                )

    server.world.comment_hooks.append(on_comment)


def mentioned(body: str) -> list[tuple[int, str]]:
    """(offset in the stripped body, login) of every distinct mention."""
    text = body.strip()
    seen: dict[str, int] = {}
    for match in _MENTION.finditer(text):
        seen.setdefault(match.group(1), match.start())
    return [(offset, login) for login, offset in seen.items()]
