"""Forge layer: one Protocol, two adapters, our own types and errors."""

from bot.forge.base import Forge
from bot.forge.errors import AuthError, ForgeError, NotFound, RateLimited, TransientError
from bot.model.thread import Comment, Kind, Permission, Platform, TaskKey, TaskSummary, Thread, User

__all__ = [
    "AuthError",
    "Comment",
    "Forge",
    "ForgeError",
    "Kind",
    "NotFound",
    "Permission",
    "Platform",
    "RateLimited",
    "TaskKey",
    "TaskSummary",
    "Thread",
    "TransientError",
    "User",
]
