"""Whose words count as instructions: the thread's author, and the repository's agent files.

Repository instruction files (AGENTS.md, CLAUDE.md, .github/copilot-instructions.md) go into
the system prompt, so they count only from the default branch's head, or from a pull/merge
request's head when the request's author has write access (the same rule as a comment's trust
tag). A contributor without write access who commits an AGENTS.md to a request, from a fork
or not, changes nothing the model is told to do.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.context.engine import agent_rules
from bot.context.tokens import TokenCounter
from bot.forge.base import Forge
from bot.forge.errors import ForgeError, NotFound
from bot.model.thread import Thread
from bot.model.trust import Trust
from bot.repo.workspace import Workspace, WorkspaceError, is_binary

MAX_RULES_BYTES = 256 * 1024


def author_trusted(forge: Forge, thread: Thread, trust: Trust) -> bool:
    """Whether the thread's author may give the bot instructions (write access, as comments)."""
    if not thread.author:
        return False
    return trust.trusted_login(thread.author, forge.permission(thread.key.repo, thread.author))


def instructions_commit(forge: Forge, thread: Thread, pinned: str, trusted: bool) -> str:
    """The commit whose instruction files count: the pinned one when it is a trusted request's
    head (or the default branch's head anyway), else the default branch's head."""
    if thread.key.is_change_request and trusted:
        return pinned
    repo = thread.key.repo
    head = forge.resolve_branch(repo, forge.default_branch(repo))
    if head is None:
        raise ForgeError(f"{repo}: the default branch has no commit")
    return head.sha


def repository_instructions(
    forge: Forge,
    thread: Thread,
    pinned: str,
    snapshot: Workspace,
    trusted: bool,
    counter: TokenCounter,
    budget: int,
) -> str:
    """The budgeted instruction text for the system prompt, from the commit that counts."""
    return agent_rules(trusted_reader(forge, thread, pinned, snapshot, trusted), counter, budget)


def trusted_reader(
    forge: Forge, thread: Thread, pinned: str, snapshot: Workspace, trusted: bool
) -> Callable[[str], str | None]:
    """Reads repository files from the commit whose instructions count (the same rule for the
    agent files and for `.coding-agent.yml`).

    `snapshot` is the pinned commit's snapshot; its changeset (the bot's own edits) is never
    read, so the bot cannot instruct itself either.
    """
    sha = instructions_commit(forge, thread, pinned, trusted)
    if sha == pinned:
        pristine = Workspace(snapshot.root, {})

        def read_pinned(name: str) -> str | None:
            try:
                return pristine.text(name)
            except WorkspaceError:
                return None

        return read_pinned

    def read_remote(name: str) -> str | None:
        try:
            data = forge.read_file(thread.key.repo, name, sha)
        except NotFound:
            return None
        if len(data) > MAX_RULES_BYTES or is_binary(data):
            return None
        return data.decode("utf-8", errors="replace")

    return read_remote
