"""The narrow interface the daemon needs from a forge."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from bot.forge.inbox import Cursors, MentionBatch
from bot.model.git import BranchHead, ChangedPaths, ChangeRequest, FileChange, TreeEntry
from bot.model.thread import (
    Comment,
    ControlEvent,
    Permission,
    Platform,
    TaskKey,
    TaskSummary,
    Thread,
    User,
)


class Forge(Protocol):
    platform: Platform

    def whoami(self) -> User:
        """The account behind the token: the bot's identity."""
        ...

    def list_tasks(self, repo: str) -> list[TaskSummary]:
        """Open threads carrying a watched label or assigned to the bot."""
        ...

    def get_thread(self, key: TaskKey) -> Thread: ...

    def list_comments(self, key: TaskKey, since: datetime | None = None) -> list[Comment]:
        """Every comment (all pages) updated at or after `since`, oldest first: conversation,
        review comments and replies (with their place in the diff), review texts."""
        ...

    def control_events(self, key: TaskKey) -> list[ControlEvent]:
        """Who labelled, unlabelled and assigned the thread, oldest first."""
        ...

    def post_comment(self, key: TaskKey, body: str, reply_to: str | None = None) -> Comment:
        """A comment in the thread; with `reply_to` (a comment id) in that comment's review
        thread where the forge has one, else in the main conversation."""
        ...

    def edit_comment(self, key: TaskKey, comment_id: str, body: str) -> Comment: ...

    def add_labels(self, key: TaskKey, labels: Sequence[str]) -> None: ...

    def remove_labels(self, key: TaskKey, labels: Sequence[str]) -> None: ...

    def permission(self, repo: str, login: str) -> Permission: ...

    def default_branch(self, repo: str) -> str: ...

    def read_file(self, repo: str, path: str, ref: str) -> bytes: ...

    # -- publishing work: each step can be looked up first, so a repeat after a crash is a no-op

    def resolve_branch(self, repo: str, branch: str) -> BranchHead | None: ...

    def tree_entries(self, repo: str, ref: str, paths: Sequence[str]) -> dict[str, TreeEntry]:
        """Mode and object id of each of `paths` that exists at commit `ref`."""
        ...

    def read_blob(self, repo: str, sha: str) -> bytes:
        """A file's content by its git object id."""
        ...

    def download_archive(self, repo: str, sha: str, dest: Path) -> None:
        """Write the repository at `sha` as a .tar.gz to `dest`."""
        ...

    def changed_paths(self, repo: str, base: str, head: str) -> ChangedPaths:
        """The paths `head` changes relative to its merge base with `base` (a branch), as a
        request from `head` into `base` would show them."""
        ...

    def commit_files(
        self, repo: str, branch: str, parent: str, message: str, changes: Sequence[FileChange]
    ) -> str:
        """One commit on top of `parent`; `branch` is created or fast-forwarded, never forced.
        Its sha. Raises `BranchMoved` when someone pushed to `branch` since `parent` (GitHub)
        or changed one of these files since (GitLab): read the head again and retry."""
        ...

    def find_change_request(self, repo: str, branch: str) -> ChangeRequest | None: ...

    def open_change_request(
        self, repo: str, branch: str, base: str, title: str, body: str, draft: bool = True
    ) -> ChangeRequest:
        """A pull/merge request from `branch` into `base` (a draft unless `draft` is false)."""
        ...


# -- optional capabilities: a forge has them or not; callers ask with `isinstance` ------------


@runtime_checkable
class CrossRepoListing(Protocol):
    """Lists the watched threads of many repositories in a few requests (search): worth it
    from `cross_repo_from` repositories on."""

    cross_repo_from: int

    def list_tasks_across(self, repos: Sequence[str]) -> tuple[list[TaskSummary], list[str]]:
        """(threads found, repositories the listing could not cover: list them one by one)."""
        ...


@runtime_checkable
class MentionInbox(Protocol):
    """Reads the account's inbox (notifications, To-Do items) for mentions of the bot."""

    def mention_batch(self, repos: Sequence[str], cursors: Cursors | None = None) -> MentionBatch:
        """The threads of `repos` where a writer called the bot; nothing is marked read before
        the batch is committed."""
        ...


@runtime_checkable
class RateLimits(Protocol):
    """Reports what is left of its rate-limit buckets (for the metrics)."""

    def rate_limits(self) -> dict[str, int]: ...
