"""Publishing a changeset: branch, one commit, a draft pull/merge request. Each step is looked
up before it is done, so repeating `finish` after a crash creates nothing twice:

- the commit carries a trailer `Bot-Task: <task> run <n>`; if the branch head has it, the
  commit was made;
- an open request from the branch is found before one is opened.

Nobody's commit is ever discarded (DESIGN invariant 12). The changeset is a set of changes
against the pinned commit; it is applied to the branch's current head. A file a person changed
since the pin is merged line by line (`merge.py`) when the changes do not overlap; otherwise
nothing is published and the task stops naming the files. The write itself is conditional
(GitHub: a ref update that is never forced; GitLab: `last_commit_id` per file): when someone
pushes between our read and our write, the head is read again and the merge redone, a bounded
number of times.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from bot.agent.merge import Conflict, merge_file
from bot.agent.protected import PathGuard
from bot.agent.snapshot import SYMLINK
from bot.agent.workspace import Workspace
from bot.config import AgentSettings
from bot.forge.base import Forge
from bot.forge.errors import BranchMoved
from bot.forge.types import BranchHead, FileChange, Kind, TaskKey, Thread, TreeEntry
from bot.log import get_logger
from bot.state import TaskState

log = get_logger(__name__)
MAX_ATTEMPTS = 3


class PublishError(Exception):
    """Nothing was published; the text says why and what a person can do."""


@dataclass(frozen=True)
class Conflicts:
    paths: list[str]


@dataclass(frozen=True)
class Published:
    branch: str
    commit: str
    request_url: str | None  # None when the commit went to the task's own PR/MR branch
    draft: bool = True


def slug(title: str, limit: int = 40) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    words = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return (words[:limit].rstrip("-")) or "change"


def branch_name(key: TaskKey, title: str, settings: AgentSettings) -> str:
    return f"{settings.branch_prefix}{key.number}-{slug(title)}"


def own_branch(thread: Thread, settings: AgentSettings) -> bool:
    """Commit to the task's own PR/MR branch: same repository, and allowed by config."""
    return (
        thread.key.kind is not Kind.ISSUE
        and settings.push_to_existing_branches
        and thread.head_repo == thread.key.repo
        and thread.head_ref is not None
    )


def publish(
    forge: Forge,
    thread: Thread,
    state: TaskState,
    workspace: Workspace,
    settings: AgentSettings,
    save: Callable[[], None],
    summary: str,
) -> Published | None:
    withheld = PathGuard.for_repo(settings, thread.key.repo).withhold(state.changes)
    if withheld:  # the tools refuse these; a changeset that has one anyway never publishes it
        log.warning("protected_paths_withheld", paths=withheld)
        save()
    if not state.changes:
        return None
    key, repo = thread.key, thread.key.repo
    if state.branch is None:
        state.branch = (
            thread.head_ref
            if own_branch(thread, settings)
            else branch_name(key, thread.title, settings)
        )
        save()
    branch = state.branch
    assert branch is not None and state.base_sha is not None
    trailer = f"Bot-Task: {key} run {state.run}"
    message = f"{_title(thread)}\n\n{_first_paragraph(summary)}\n\n{trailer}"
    commit = _commit(forge, repo, branch, state, workspace, message, trailer)
    if commit is None:
        return None
    state.commit_sha = commit
    save()
    if branch == thread.head_ref and thread.key.kind is not Kind.ISSUE:
        return Published(branch, commit, None)
    existing = forge.find_change_request(repo, branch)
    if existing is None:
        base = state.base_branch or thread.base_ref or "main"
        existing = forge.open_change_request(
            repo,
            branch,
            base,
            _title(thread),
            _body(thread, state, workspace, summary),
            draft=settings.draft_change_requests,
        )
        log.info("change_request_opened", url=existing.url, branch=branch)
    state.change_request_url = existing.url
    save()
    return Published(branch, commit, existing.url, existing.draft)


def _commit(
    forge: Forge,
    repo: str,
    branch: str,
    state: TaskState,
    workspace: Workspace,
    message: str,
    trailer: str,
) -> str | None:
    """The commit that carries the changeset on `branch` (None: nothing to change)."""
    assert state.base_sha is not None
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
            commit = forge.commit_files(repo, branch, parent, message, changes)
        except BranchMoved as exc:
            log.warning("branch_moved", branch=branch, attempt=attempt, error=str(exc))
            continue
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
