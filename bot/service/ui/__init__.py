"""The read-only task page: a list of tasks and a page per task with its timeline, served by
the same waitress listener as the webhooks (README, "The task page").

Server-rendered HTML from Jinja2 templates with autoescaping on: every text that came from a
forge, the model or the repository is escaped, and the response headers forbid scripts,
frames and any resource from elsewhere (`Content-Security-Policy: default-src 'none'`), as a
second wall. Everything is read from the store (`bot/task/timeline.py`), so the page is the
same on any daemon of a fleet and after a restart; it changes nothing.
"""

from bot.service.ui.factory import build_page
from bot.service.ui.wsgi import PageApp

__all__ = ["PageApp", "build_page"]
