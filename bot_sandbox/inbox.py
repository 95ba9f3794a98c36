"""What the forges keep for a user to read: GitHub notification threads, GitLab To-Do items.

`bot_sandbox/mentions.py` fills them; `github/notifications.py` and `gitlab/todos.py` serve them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot_sandbox.world import SComment, SRepo, SThread


@dataclass
class SNotification:
    id: int
    repo: SRepo
    thread: SThread
    reason: str
    updated_at: datetime
    unread: bool = True
    last_read_at: datetime | None = None


@dataclass
class STodo:
    id: int
    repo: SRepo
    thread: SThread
    action: str  # "mentioned" or "directly_addressed"
    note: SComment
    state: str = "pending"
