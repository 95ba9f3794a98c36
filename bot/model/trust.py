"""Who the bot is and whose words count: the bot's identity, the trust rule, and a comment tagged
with its author's trust."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.core.config import AccessSettings
from bot.model.thread import Comment, Permission


@dataclass(frozen=True)
class Identity:
    """Who the bot is (from the token) and which other authors are bots to ignore."""

    login: str
    ignore_authors: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, login: str, access: AccessSettings) -> Identity:
        return cls(login, frozenset(a.lower() for a in access.ignore_authors))

    def ignores(self, author: str) -> bool:
        lowered = author.lower()
        return lowered == self.login.lower() or lowered in self.ignore_authors


@dataclass(frozen=True)
class Trust:
    allowed_users: frozenset[str] = frozenset()
    untrusted: Literal["quote", "ignore"] = "quote"

    @classmethod
    def from_settings(cls, access: AccessSettings) -> Trust:
        return cls(frozenset(u.lower() for u in access.allowed_users), access.untrusted_comments)

    def trusted(self, comment: Comment) -> bool:
        return self.trusted_login(comment.author, comment.permission)

    def trusted_login(self, login: str, permission: Permission) -> bool:
        """The one rule for comments, thread authors and repository instruction files."""
        if not permission.can_write:
            return False
        return not self.allowed_users or login.lower() in self.allowed_users


@dataclass(frozen=True)
class NewComment:
    comment: Comment
    edited: bool
    trusted: bool
