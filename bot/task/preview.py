"""`bot context`: what the agent would be shown for a thread, without calling the model."""

from __future__ import annotations

from bot.agent.instructions import author_trusted
from bot.context.engine import OpeningContext, initial_context
from bot.context.tokens import TokenCounter
from bot.core.config import Settings
from bot.forge.base import Forge
from bot.model.thread import TaskKey
from bot.model.trust import Identity, NewComment, Trust
from bot.repo.pinned import task_workspace
from bot.repo.pinning import pin


def preview(
    forge: Forge, key: TaskKey, settings: Settings, counter: TokenCounter
) -> OpeningContext:
    access = settings.access
    identity = Identity.from_settings(forge.whoami().login, access)
    trust = Trust.from_settings(access)
    thread = forge.get_thread(key)
    comments = [
        NewComment(c, False, trust.trusted(c))
        for c in forge.list_comments(key)
        if not (c.author_is_bot or c.is_system or identity.ignores(c.author))
    ]
    shown = [c for c in comments if c.trusted or trust.untrusted == "quote"]
    sha, _target = pin(forge, thread)
    # Through the cache like a task: pinned while read, the cache kept within its size.
    workspace = task_workspace(forge, key, sha, {}, settings)
    budget = (settings.llm.context_window - settings.llm.reserve_output_tokens) // 2
    base = None
    if key.is_change_request and thread.base_ref:
        target = forge.resolve_branch(key.repo, thread.base_ref)
        if target is not None and target.sha != sha:
            base = task_workspace(forge, key, target.sha, {}, settings)
    trusted = author_trusted(forge, thread, trust)
    return initial_context(
        thread, shown, workspace, counter, budget, base=base, author_trusted=trusted
    )
