"""Publishing a changeset: branch, one commit, a draft pull/merge request. Each step is looked
up before it is done, so repeating `finish` after a crash creates nothing twice:

- the commit carries a trailer `Bot-Task: <task> run <n>`; if the branch head has it, the
  commit was made;
- an open request from the branch is found before one is opened.

Nobody's commit is ever discarded (docs/architecture.md, invariant 12). The changeset is a set
of changes against the pinned commit; it is applied to the branch's current head. A file a
person changed since the pin is merged line by line (`merge.py`) when the changes do not
overlap; otherwise nothing is published and the task stops naming the files. The write itself
is conditional (GitHub: a ref update that is never forced; GitLab: `last_commit_id` per file):
when someone pushes between our read and our write, the head is read again and the merge
redone, a bounded number of times.

Where the commit goes is `destination.py`'s choice: a request whose head comes from outside
never becomes the base of a branch in the task's repository. Independently, before any push to
the task's repository, the protected paths are checked against the whole diff the push would
bring (docs/architecture.md, invariant 13): for a new branch, everything its parent commit
changes since its merge base with the target branch, plus the bot's changes; for an existing
branch (a fast-forward), the bot's changes. A protected path among them refuses the push.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from bot.core.config import AgentSettings
from bot.core.log import get_logger
from bot.forge.base import Forge
from bot.forge.errors import BranchMoved, Forbidden, NotFound
from bot.forge.limits import fit, request_body_chars
from bot.model.git import BranchHead, FileChange, TreeEntry
from bot.model.state import TaskState
from bot.model.thread import Kind, TaskKey, Thread
from bot.repo.destination import Destination, Where, choose, head_from_outside
from bot.repo.merge import Conflict, merge_file
from bot.repo.patch import render_patch
from bot.repo.protected import PathGuard
from bot.repo.snapshot import SYMLINK
from bot.repo.workspace import Workspace

log = get_logger(__name__)
MAX_ATTEMPTS = 3


class PublishError(Exception):
    """Nothing was published; the text says why and what a person can do."""


@dataclass(frozen=True)
class Conflicts:
    paths: list[str]


@dataclass(frozen=True)
class Published:
    branch: str | None  # None for a patch
    commit: str | None
    request_url: str | None  # None when the commit went to the task's own PR/MR branch
    draft: bool = True
    repo: str | None = None  # the repository of `branch` when it is not the task's (a fork)
    patch: str | None = None  # the change as a patch, when nothing could be pushed
    why_patch: str = ""


class _PushRefused(Exception):
    """The fork's branch may not (or no longer) take the bot's push: answer with a patch."""


def slug(title: str, limit: int = 40) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    words = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return (words[:limit].rstrip("-")) or "change"


def branch_name(key: TaskKey, title: str, settings: AgentSettings) -> str:
    return f"{settings.branch_prefix}{key.number}-{slug(title)}"


def publish(
    forge: Forge,
    thread: Thread,
    state: TaskState,
    workspace: Workspace,
    settings: AgentSettings,
    save: Callable[[], None],
    summary: str,
    *,
    outside: bool | None = None,
) -> Published | None:
    """`outside`: whether a request's head may carry commits by people without write access
    (`destination.head_from_outside`); when not given, read from the forge."""
    guard = PathGuard.for_repo(settings, thread.key.repo)
    withheld = guard.withhold(state.changes)
    if withheld:  # the tools refuse these; a changeset that has one anyway never publishes it
        log.warning("protected_paths_withheld", paths=withheld)
        save()
    if not state.changes:
        return None
    if outside is None:
        author = forge.permission(thread.key.repo, thread.author) if thread.author else None
        outside = head_from_outside(thread, bool(author and author.can_write))
    dest = choose(thread, state, settings, outside, branch_name(thread.key, thread.title, settings))
    if dest.where is Where.PATCH:
        return _as_patch(state, workspace, dest.why_patch)
    if state.branch is None:
        state.branch, state.branch_kind = dest.branch, dest.where.value
        state.branch_repo = None if dest.repo == thread.key.repo else dest.repo
        save()
    try:
        return _push(forge, thread, state, workspace, settings, save, summary, dest, guard)
    except _PushRefused as exc:
        log.warning("push_refused", repo=dest.repo, branch=dest.branch, reason=str(exc))
        return _as_patch(state, workspace, str(exc))


def _as_patch(state: TaskState, workspace: Workspace, why: str) -> Published:
    patch = render_patch(state.changes, workspace.snapshot_bytes)
    log.info("change_as_patch", files=len(state.changes), chars=len(patch))
    return Published(None, None, None, patch=patch, why_patch=why)


def _push(
    forge: Forge,
    thread: Thread,
    state: TaskState,
    workspace: Workspace,
    settings: AgentSettings,
    save: Callable[[], None],
    summary: str,
    dest: Destination,
    guard: PathGuard,
) -> Published | None:
    key = thread.key
    branch = dest.branch
    assert branch is not None and state.base_sha is not None
    trailer = f"Bot-Task: {key} run {state.run}"
    message = f"{_title(thread)}\n\n{_first_paragraph(summary)}\n\n{trailer}"
    target = Target(forge, thread, dest, state.base_branch or thread.base_ref or "main", guard)
    commit = _commit(forge, target, state, workspace, message, trailer)
    if commit is None:
        return None
    state.commit_sha = commit
    save()
    if dest.where is not Where.NEW_BRANCH:
        return Published(branch, commit, None, repo=None if dest.repo == key.repo else dest.repo)
    repo = key.repo
    existing = forge.find_change_request(repo, branch)
    if existing is None:
        base = state.base_branch or thread.base_ref or "main"
        existing = forge.open_change_request(
            repo,
            branch,
            base,
            _title(thread),
            fit(_body(thread, state, workspace, summary), "", request_body_chars(key.platform)),
            draft=settings.draft_change_requests,
        )
        log.info("change_request_opened", url=existing.url, branch=branch)
    state.change_request_url = existing.url
    save()
    return Published(branch, commit, existing.url, existing.draft)


@dataclass(frozen=True)
class Target:
    """What a push is checked against: where it goes, and the branch a request would merge
    it into."""

    forge: Forge
    thread: Thread
    dest: Destination
    base_branch: str
    guard: PathGuard

    @property
    def repo(self) -> str:
        return self.dest.repo

    @property
    def branch(self) -> str:
        assert self.dest.branch is not None
        return self.dest.branch

    def check(self, head: BranchHead | None, parent: str, changes: list[FileChange]) -> None:
        """Refuse a push that would bring a protected path, or a fork push that is no longer
        allowed (each looked up right before the push)."""
        if self.dest.where is Where.FORK_BRANCH:
            self._still_allowed(head)
            return  # the fork's own files are the fork's; the bot's are checked below
        touched = {c.path for c in changes}
        if head is None:
            touched |= self._brought_by(parent)
        refused = sorted(p for p in touched if self.guard.refusal(p) is not None)
        if refused:
            raise PublishError(
                f"pushing to `{self.branch}` would bring changes to protected paths "
                f"({', '.join(f'`{p}`' for p in refused)}) relative to `{self.base_branch}`, "
                "which this repository's configuration does not allow; nothing was published"
            )

    def _brought_by(self, parent: str) -> set[str]:
        """What a new branch at `parent` brings that `base_branch` does not have."""
        try:
            compared = self.forge.changed_paths(self.repo, self.base_branch, parent)
        except NotFound as exc:
            raise PublishError(
                f"`{self.base_branch}` is gone, so I cannot check what a new branch would "
                "bring; nothing was published"
            ) from exc
        if compared.ancestor:
            return set()
        if not compared.complete:
            raise PublishError(
                f"the commit I started from changes too many files relative to "
                f"`{self.base_branch}` for me to check them for protected paths; nothing was "
                "published"
            )
        return set(compared.paths)

    def _still_allowed(self, head: BranchHead | None) -> None:
        """Immediately before a push to a fork: the request still comes from that fork and
        branch, still allows maintainers to push, and its head is the commit we build on."""
        fresh = self.forge.get_thread(self.thread.key)
        if fresh.head_repo != self.repo or fresh.head_ref != self.branch:
            raise _PushRefused("the request's branch changed while I worked")
        if not fresh.maintainer_can_modify:
            raise _PushRefused("the request no longer allows maintainers to push to its branch")
        if fresh.state != "open":
            raise _PushRefused("the request is no longer open")
        if head is None:
            raise _PushRefused(f"the branch `{self.branch}` is gone from `{self.repo}`")
        if fresh.head_sha != head.sha:
            raise BranchMoved(f"{self.branch} moved: the request's head is not the branch's")


def _commit(
    forge: Forge,
    target: Target,
    state: TaskState,
    workspace: Workspace,
    message: str,
    trailer: str,
) -> str | None:
    """The commit that carries the changeset on the target branch (None: nothing to change)."""
    assert state.base_sha is not None
    repo, branch = target.repo, target.branch
    for attempt in range(1, MAX_ATTEMPTS + 1):
        head = forge.resolve_branch(repo, branch)
        if head is not None and trailer in head.message:
            return head.sha  # made before a crash: not again
        changes = _changes(forge, repo, head, state.base_sha, state.changes, workspace)
        if isinstance(changes, Conflicts):
            raise PublishError(
                f"my changes conflict with commits pushed to `{branch}` since I started, in "
                f"{', '.join(f'`{p}`' for p in changes.paths)}; nothing was published. Resolve "
                "it on the branch, or ask again with /bot to start over from its new head"
            )
        if not changes:
            log.info("nothing_to_commit", branch=branch)
            return head.sha if head is not None else None
        parent = head.sha if head is not None else state.base_sha
        try:
            target.check(head, parent, changes)
            commit = forge.commit_files(repo, branch, parent, message, changes)
        except BranchMoved as exc:
            log.warning("branch_moved", branch=branch, attempt=attempt, error=str(exc))
            continue
        except (Forbidden, NotFound) as exc:
            if target.dest.where is not Where.FORK_BRANCH:
                raise
            raise _PushRefused("the forge refused my push to the request's branch") from exc
        log.info("changes_committed", branch=branch, commit=commit, files=len(changes))
        return commit
    raise PublishError(
        f"`{branch}` kept changing while I published ({MAX_ATTEMPTS} attempts); nothing was "
        "published. Ask again with /bot when the pushes have settled"
    )


def _changes(
    forge: Forge,
    repo: str,
    head: BranchHead | None,
    base_sha: str,
    changeset: dict[str, str | None],
    workspace: Workspace,
) -> list[FileChange] | Conflicts:
    """The changeset as changes to `head` (or to the pinned commit when the branch is new):
    each file merged with what others did to it since the pin; or every file that conflicts."""
    moved = head is not None and head.sha != base_sha
    entries = forge.tree_entries(repo, head.sha, list(changeset)) if moved and head else {}
    changes: list[FileChange] = []
    conflicts: list[str] = []
    for path, content in sorted(changeset.items()):
        base, mode = workspace.snapshot_bytes(path), workspace.mode(path)
        ours = None if content is None else content.encode("utf-8")
        theirs = base
        if moved:
            theirs, their_mode = _theirs(forge, repo, entries.get(path), base)
            if _type_changed(base, mode, theirs, their_mode):
                conflicts.append(path)  # a file became a link or the reverse: no line merge
                continue
            mode = their_mode or mode  # the bot never changes modes: a person's chmod stays
        try:
            merged = merge_file(base, ours, theirs)
        except Conflict:
            conflicts.append(path)
            continue
        if merged == theirs:
            continue  # the branch has it already (with no branch yet: the pinned commit has)
        text = None if merged is None else merged.decode("utf-8")
        existed = theirs is not None if moved else workspace.exists_in_snapshot(path)
        changes.append(FileChange(path, text, existed, mode))
    return Conflicts(conflicts) if conflicts else changes


def _theirs(
    forge: Forge, repo: str, entry: TreeEntry | None, base: bytes | None
) -> tuple[bytes | None, str | None]:
    """The file (None: absent) and its mode at the branch head; read only when it differs
    from the pinned commit's."""
    if entry is None:
        return None, None
    if base is not None and entry.sha == _blob_sha(base):
        return base, entry.mode
    return forge.read_blob(repo, entry.sha), entry.mode


def _type_changed(
    base: bytes | None, mode: str, theirs: bytes | None, their_mode: str | None
) -> bool:
    if base is None or theirs is None or their_mode is None:
        return False
    return (mode == SYMLINK) != (their_mode == SYMLINK)


def _blob_sha(data: bytes) -> str:
    """Git's object id of a blob: equal ids, equal content, without downloading it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _title(thread: Thread) -> str:
    return f"{thread.title} (#{thread.key.number})"


def _first_paragraph(text: str) -> str:
    return text.strip().split("\n\n")[0][:500]


def _body(thread: Thread, state: TaskState, workspace: Workspace, summary: str) -> str:
    files = "\n".join(
        f"- `{path}`{' (deleted)' if content is None else ''}"
        for path, content in sorted(state.changes.items())
        if content is not None or workspace.exists_in_snapshot(path)
    )
    link = (
        f"Closes #{thread.key.number}"
        if thread.key.kind is Kind.ISSUE
        else f"Follow-up to {thread.key}"
    )
    return f"{link}\n\n{summary.strip()}\n\n**Changed files**\n{files}\n"
