"""Webhook deliveries in, one targeted thread check out.

A delivery is acted on only when it is verified (GitHub's HMAC signature, GitLab's secret
token, compared in constant time), not oversized and not seen before. An accepted event names
one thread; the daemon checks that thread at once. Polling stays the sweep that catches
whatever a lost delivery would have told.
"""

from bot.service.webhooks.events import thread_of
from bot.service.webhooks.server import Rejection, WebhookServer
from bot.service.webhooks.verify import verify_github, verify_gitlab

__all__ = ["Rejection", "WebhookServer", "thread_of", "verify_github", "verify_gitlab"]
