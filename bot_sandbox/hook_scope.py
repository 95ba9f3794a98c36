"""Which GitLab request a change came from, for the ids its webhook deliveries carry.

GitLab gives every hook one `X-Gitlab-Event-UUID` per request: the events one request fires (a
note whose quick action sets a label: a Note Hook and an Issue Hook) share it, and a request
made by a webhook's receiver that sends the header back gets the same value again ("Recursive
webhooks have the same value": docs.gitlab.com/user/project/integrations/webhooks, "Delivery
headers"; lib/gitlab/web_hooks/recursion_detection/uuid.rb: `request_uuid ||
new_uuids_for_hooks[hook.id] ||= SecureRandom.uuid`). The emulator's HTTP handler opens one
scope per request; a change made outside any request (a test seeding the world) gets its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Scope:
    recycled: str | None = None  # the request's own X-Gitlab-Event-UUID, when it had one
    per_hook: dict[str, str] = field(default_factory=dict)

    def event_uuid(self, hook: str) -> str:
        return self.recycled or self.per_hook.setdefault(hook, str(uuid.uuid4()))


_current: ContextVar[Scope | None] = ContextVar("gitlab_request_scope", default=None)


@contextmanager
def request(recycled: str | None = None) -> Iterator[Scope]:
    """One GitLab request: every change inside it shares its Event-UUIDs."""
    token = _current.set(Scope(recycled or None))
    try:
        yield _current.get() or Scope()
    finally:
        _current.reset(token)


def current() -> Scope:
    return _current.get() or Scope()
