"""structlog setup: JSON lines on stdout, one renderer for structlog and stdlib loggers.

Nothing is configured at import time; the CLI calls `configure()` once. Secrets are removed by
`Redactor`, which runs last before rendering so that it also sees exception text.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable
from typing import Any, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor

from bot.core.log_libraries import DropDuplicates, name_library_events

# Token shapes redacted even when the value is not known (e.g. a token from another source).
_TOKEN_SHAPES = re.compile(
    r"(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_\-]{16,}"
    r"|sk-[A-Za-z0-9_\-]{20,}|(?i:bearer|token)\s+[A-Za-z0-9_\-.=]{16,})"
)
REDACTED = "[REDACTED]"
# httpx2/httpcore2: the openai SDK's HTTP client, which logs every request at info.
_QUIET_LIBRARIES = (
    "urllib3",
    "github",
    "gitlab",
    "apscheduler",
    "openai",
    "httpx",
    "httpx2",
    "httpcore",
    "httpcore2",
    "mcp",
)


class Redactor:
    """Replace known secret values and token-shaped strings anywhere in an event."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: tuple[str, ...] = ()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        # Longest first so that a secret containing another is removed whole.
        merged = {s for s in (*self._secrets, *secrets) if len(s) >= 4}
        self._secrets = tuple(sorted(merged, key=len, reverse=True))

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return _TOKEN_SHAPES.sub(REDACTED, text)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._walk(v) for v in value]
        if isinstance(value, int | float | bool) or value is None:
            return value
        return self.scrub(str(value))

    def __call__(self, logger: Any, name: str, event_dict: EventDict) -> EventDict:
        return {key: self._walk(value) for key, value in event_dict.items()}


_REDACTOR = Redactor()


def redactor() -> Redactor:
    """The process-wide redactor; adapters register secrets they learn at run time."""
    return _REDACTOR


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def configure(
    level: str = "info",
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> None:
    """Route structlog and stdlib logging to JSON lines on `stream` (stdout by default)."""
    _REDACTOR.add(secrets)
    numeric = logging.getLevelName(level.upper())
    final: list[Processor] = [
        structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False)),
        structlog.processors.UnicodeDecoder(),
        _REDACTOR,
    ]
    formatter = structlog.stdlib.ProcessorFormatter(
        pass_foreign_args=True,  # for name_library_events, which removes them again
        foreign_pre_chain=[
            *_shared_processors(),
            structlog.stdlib.ExtraAdder(),
            name_library_events,  # psycopg_pool's and APScheduler's records: named events
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *final,
            structlog.processors.JSONRenderer(ensure_ascii=False),
        ],
    )
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(formatter)
    handler.addFilter(DropDuplicates())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    for name in _QUIET_LIBRARIES:
        # Library debug output would carry request URLs and headers; keep it at warning
        # unless the whole daemon is at debug.
        logging.getLogger(name).setLevel(numeric if numeric <= logging.DEBUG else logging.WARNING)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared_processors(),
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name)
    return logger
