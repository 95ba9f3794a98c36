from __future__ import annotations

from tests.jail.test_jail import snapshot

__all__ = ["snapshot"]
