"""Delivery authentication, in constant time.

GitHub signs the raw body: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`
(docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries). GitLab sends the
configured secret token verbatim in `X-Gitlab-Token` (docs.gitlab.com/user/project/integrations/
webhooks, "Secret token").
"""

from __future__ import annotations

import hashlib
import hmac


def github_signature(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify_github(secret: bytes, body: bytes, header: str | None) -> bool:
    if not header or not secret:
        return False
    return hmac.compare_digest(github_signature(secret, body).encode(), header.strip().encode())


def verify_gitlab(secret: bytes, header: str | None) -> bool:
    if not header or not secret:
        return False
    return hmac.compare_digest(secret, header.encode())
