"""Publishing a changeset: branch, one commit, a draft pull/merge request. Each step is looked
up before it is done, so repeating `finish` after a crash creates nothing twice:

- the commit carries a trailer `Bot-Task: <task> run <n>`; if the branch head has it, the
  commit was made;
- an open request from the branch is found before one is opened.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from bot.agent.protected import PathGuard
from bot.agent.workspace import Workspace
from bot.config import AgentSettings
from bot.forge.base import Forge
from bot.forge.types import FileChange, Kind, TaskKey, Thread
from bot.log import get_logger
from bot.state import TaskState

log = get_logger(__name__)


@dataclass(frozen=True)
class Published:
    branch: str
    commit: str
    request_url: str | None  # None when the commit went to the task's own PR/MR branch


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
    head = forge.resolve_branch(repo, branch)
    if head is not None and trailer in head.message:
        commit = head.sha  # made before a crash: not again
    else:
        parent = head.sha if head is not None else state.base_sha
        changes = [
            FileChange(path, content, workspace.exists_in_snapshot(path))
            for path, content in sorted(state.changes.items())
            if content is not None or workspace.exists_in_snapshot(path)
        ]
        message = f"{_title(thread)}\n\n{_first_paragraph(summary)}\n\n{trailer}"
        commit = forge.commit_files(repo, branch, parent, message, changes)
        log.info("changes_committed", branch=branch, commit=commit, files=len(changes))
    state.commit_sha = commit
    save()
    if branch == thread.head_ref and thread.key.kind is not Kind.ISSUE:
        return Published(branch, commit, None)
    existing = forge.find_change_request(repo, branch)
    if existing is None:
        base = state.base_branch or thread.base_ref or "main"
        existing = forge.open_change_request(
            repo, branch, base, _title(thread), _body(thread, state, summary)
        )
        log.info("change_request_opened", url=existing.url, branch=branch)
    state.change_request_url = existing.url
    save()
    return Published(branch, commit, existing.url)


def _title(thread: Thread) -> str:
    return f"{thread.title} (#{thread.key.number})"


def _first_paragraph(text: str) -> str:
    return text.strip().split("\n\n")[0][:500]


def _body(thread: Thread, state: TaskState, summary: str) -> str:
    files = "\n".join(
        f"- `{path}`{' (deleted)' if content is None else ''}"
        for path, content in sorted(state.changes.items())
    )
    link = (
        f"Closes #{thread.key.number}"
        if thread.key.kind is Kind.ISSUE
        else f"Follow-up to {thread.key}"
    )
    return f"{link}\n\n{summary.strip()}\n\n**Changed files**\n{files}\n"
