"""A forge whose every write is preceded by the task's lease check (fencing).

A daemon frozen past its lease (GC pause, SIGSTOP, a network partition) wakes up believing it
still works on the task; another daemon may have taken it over meanwhile. `Lease.check()` asks
the store, on the store's clock, whether the lease is still this one and extends it, and raises
`LeaseLost` otherwise: the write is never sent. Reads pass through unchecked.

The forges accept no fencing token, so a freeze that starts after the check and outlasts the
lease (milliseconds before the request leaves) can still let one stale write through; the
posting markers (docs/architecture.md, invariant 3) make such a comment visible to the next
holder, which does not post it again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from bot.forge.base import Forge
from bot.model.git import ChangeRequest, FileChange
from bot.model.thread import Comment, TaskKey
from bot.store.base import Lease


class _FencedForge:
    def __init__(self, forge: Forge, lease: Lease) -> None:
        self._forge = forge
        self._lease = lease

    def __getattr__(self, name: str) -> Any:
        return getattr(self._forge, name)  # reads: no side effect, no check

    def post_comment(self, key: TaskKey, body: str, reply_to: str | None = None) -> Comment:
        self._lease.check()
        return self._forge.post_comment(key, body, reply_to)

    def edit_comment(self, key: TaskKey, comment_id: str, body: str) -> Comment:
        self._lease.check()
        return self._forge.edit_comment(key, comment_id, body)

    def add_labels(self, key: TaskKey, labels: Sequence[str]) -> None:
        self._lease.check()
        self._forge.add_labels(key, labels)

    def remove_labels(self, key: TaskKey, labels: Sequence[str]) -> None:
        self._lease.check()
        self._forge.remove_labels(key, labels)

    def commit_files(
        self, repo: str, branch: str, parent: str, message: str, changes: Sequence[FileChange]
    ) -> str:
        self._lease.check()
        return self._forge.commit_files(repo, branch, parent, message, changes)

    def open_change_request(
        self, repo: str, branch: str, base: str, title: str, body: str, draft: bool = True
    ) -> ChangeRequest:
        self._lease.check()
        return self._forge.open_change_request(repo, branch, base, title, body, draft)


def fenced(forge: Forge, lease: Lease) -> Forge:
    """`forge` with every write checked against `lease` first."""
    return cast(Forge, _FencedForge(forge, lease))
