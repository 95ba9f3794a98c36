"""`bot context`: what the agent would be shown for a thread, without calling the model."""

from __future__ import annotations

from pathlib import Path

from bot.agent.pinning import pin
from bot.agent.snapshot import snapshot
from bot.agent.workspace import Workspace
from bot.comments import Identity, NewComment, Trust
from bot.config import Settings
from bot.context.engine import OpeningContext, initial_context
from bot.context.tokens import TokenCounter
from bot.forge.base import Forge
from bot.forge.types import TaskKey


def preview(
    forge: Forge, key: TaskKey, settings: Settings, counter: TokenCounter
) -> OpeningContext:
    access = settings.access
    identity = Identity(forge.whoami().login, frozenset(a.lower() for a in access.ignore_authors))
    trust = Trust(frozenset(u.lower() for u in access.allowed_users), access.untrusted_comments)
    thread = forge.get_thread(key)
    comments = [
        NewComment(c, False, trust.trusted(c))
        for c in forge.list_comments(key)
        if not (c.author_is_bot or c.is_system or identity.ignores(c.author))
    ]
    shown = [c for c in comments if c.trusted or trust.untrusted == "quote"]
    sha, _target = pin(forge, thread)
    root = snapshot(forge, key.repo, sha, Path(settings.state_dir) / "cache")
    budget = (settings.llm.context_window - settings.llm.reserve_output_tokens) // 2
    return initial_context(thread, shown, Workspace(root, {}), counter, budget)
