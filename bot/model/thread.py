"""Domain types shared by both forge adapters; no PyGithub or python-gitlab object leaks out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum, StrEnum


class Platform(StrEnum):
    GITHUB = "github"
    GITLAB = "gitlab"


class Kind(StrEnum):
    ISSUE = "issue"
    PULL = "pull"
    MERGE_REQUEST = "merge_request"


class Permission(IntEnum):
    """Repository access of a user, ordered so that `>=` compares levels."""

    NONE = 0
    READ = 1
    TRIAGE = 2
    WRITE = 3
    MAINTAIN = 4
    ADMIN = 5

    @property
    def can_write(self) -> bool:
        return self >= Permission.WRITE


_KEY = re.compile(r"^(github|gitlab):([^#!\s]+/[^#!\s]+)([#!])(\d+)(p?)$")


@dataclass(frozen=True, order=True)
class TaskKey:
    """One issue, pull request or merge request.

    String form: `github:owner/repo#12` (issue), `github:owner/repo#12p` (pull request; GitHub
    shares one number space but the kinds behave differently), `gitlab:group/proj#3` (issue),
    `gitlab:group/proj!7` (merge request).
    """

    platform: Platform
    repo: str
    kind: Kind
    number: int

    def __str__(self) -> str:
        if self.kind is Kind.MERGE_REQUEST:
            return f"{self.platform}:{self.repo}!{self.number}"
        suffix = "p" if self.kind is Kind.PULL else ""
        return f"{self.platform}:{self.repo}#{self.number}{suffix}"

    @classmethod
    def parse(cls, text: str) -> TaskKey:
        match = _KEY.match(text.strip())
        if not match:
            raise ValueError(f"not a task reference: {text!r} (expected e.g. github:owner/repo#12)")
        platform, repo, sep, number, pull = match.groups()
        if sep == "!":
            if platform != "gitlab" or pull:
                raise ValueError(f"'!' is for GitLab merge requests: {text!r}")
            kind = Kind.MERGE_REQUEST
        elif pull:
            if platform != "github":
                raise ValueError(f"'#Np' is for GitHub pull requests: {text!r}")
            kind = Kind.PULL
        else:
            kind = Kind.ISSUE
        return cls(Platform(platform), repo, kind, int(number))

    @property
    def is_change_request(self) -> bool:
        return self.kind is not Kind.ISSUE


@dataclass(frozen=True)
class User:
    login: str
    id: int
    is_bot: bool = False


@dataclass(frozen=True)
class ReviewPosition:
    """Where a review comment sits in a pull/merge request's diff.

    `side` "RIGHT" means `line` counts in the new version of the file, "LEFT" in the old one
    (a removed line). `line` is None when the comment is outdated (the code moved on);
    `original_line` is then where it was made.
    """

    path: str
    line: int | None = None
    side: str = "RIGHT"
    start_line: int | None = None  # first line of a multi-line comment
    original_line: int | None = None
    old_path: str | None = None  # GitLab: the file's path before the change, when renamed
    diff_hunk: str = ""  # GitHub: the diff up to the commented line


@dataclass(frozen=True)
class Comment:
    id: str
    author: str
    body: str
    created_at: datetime
    updated_at: datetime
    permission: Permission = Permission.NONE
    author_is_bot: bool = False
    is_system: bool = False
    # "conversation" for issue comments and notes, "review" for comments in a review thread
    # (on a line of the diff, or replies there), "review_summary" for a review's own text.
    kind: str = "conversation"
    position: ReviewPosition | None = None
    # The review thread it belongs to (GitHub: the top-level review comment's id; GitLab: the
    # discussion id) and the comment it answers; a reply to it lands in the same thread.
    thread_id: str | None = None
    in_reply_to: str | None = None
    review_state: str | None = None  # review summaries: approved, changes_requested, ...
    # GitLab internal note (formerly "confidential"): only project members can read it, so
    # nothing the bot posts in public may quote it.
    internal: bool = False


@dataclass(frozen=True)
class TaskSummary:
    """What discovery sees of a thread: enough to decide whether to work on it."""

    key: TaskKey
    title: str
    labels: frozenset[str]
    assignees: frozenset[str]
    updated_at: datetime
    is_open: bool = True
    # A writer mentioned the bot (or wrote `/bot`) on it: a start even without a label.
    mentioned: bool = False


@dataclass(frozen=True)
class Thread:
    key: TaskKey
    title: str
    body: str
    author: str
    state: str
    labels: frozenset[str]
    assignees: frozenset[str]
    created_at: datetime
    updated_at: datetime
    web_url: str = ""
    # Pull/merge requests only.
    head_ref: str | None = None
    head_sha: str | None = None
    base_ref: str | None = None
    # The repository the head branch lives in (`owner/name`; a fork's path when it is not
    # `key.repo`; None when the forge no longer knows it, e.g. a deleted fork).
    head_repo: str | None = None
    # GitHub `maintainer_can_modify`, GitLab `allow_collaboration`: people with write access to
    # `key.repo` may push to the head branch in the fork.
    maintainer_can_modify: bool = False
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ControlEvent:
    """Who put a label on a thread, took one off, or assigned someone: the forge's own record
    (GitHub issue events; GitLab resource label events and assignment system notes)."""

    kind: str  # "labeled", "unlabeled", "assigned"
    name: str  # the label, or the assignee's login
    actor: str
    at: datetime
    id: str
