"""The log records of the libraries that speak during operations (psycopg_pool, APScheduler,
the `mcp` SDK) as named events with fields: the JSON log holds no free-text line of theirs.

`name_library_events` runs in the stdlib bridge (`ProcessorFormatter.foreign_pre_chain`): it
knows their message templates and puts the arguments in fields; any other record of theirs
gets a fixed event name with its text in `message`. `DropDuplicates` leaves out APScheduler's
lines about a job that failed, ran late or was skipped: `JobQueue` logs those facts itself,
typed (`job_failed`, `job_missed`, `job_skipped`), and one line per fact is enough.

The `mcp` SDK's records keep only their message template: its arguments and exceptions may
quote what a server printed (a line on stdout that was not JSON-RPC), and a server may print
what it was given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from structlog.typing import EventDict

Args = tuple[Any, ...]

_POOL = "psycopg.pool"
_SCHEDULER = "apscheduler"
_MCP = "mcp"
# (library, message template) -> event, and the fields made of the record's arguments.
_NAMED: dict[tuple[str, str], tuple[str, Callable[[Args], dict[str, Any]]]] = {
    (_POOL, "error connecting in %r: %s"): (
        "database_connect_failed",
        lambda a: {"pool": str(a[0]), "error": str(a[1])},
    ),
    (_POOL, "reconnection attempt in pool %r failed after %s sec"): (
        "database_reconnect_gave_up",
        lambda a: {"pool": str(a[0]), "seconds": a[1]},
    ),
    (_POOL, "discarding broken connection: %s"): (
        "database_connection_discarded",
        lambda a: {"reason": "broken"},
    ),
    (_POOL, "discarding closed connection: %s"): (
        "database_connection_discarded",
        lambda a: {"reason": "closed"},
    ),
}
_OTHERS = {
    _POOL: "database_pool_message",
    _SCHEDULER: "scheduler_message",
    _MCP: "mcp_library_message",
}
_DUPLICATES = frozenset(
    {
        'Run time of job "%s" was missed by %s',
        'Execution of job "%s" skipped: maximum number of running instances reached (%d)',
        'Job "%s" raised an exception',
    }
)


def _library(name: str) -> str | None:
    for library in _OTHERS:
        if name == library or name.startswith(library + "."):
            return library
    return None


def name_library_events(logger: Any, method: str, event_dict: EventDict) -> EventDict:
    """A foreign-chain processor: a psycopg_pool or APScheduler record as a named event."""
    # The record's arguments (`ProcessorFormatter(pass_foreign_args=True)`): never a field.
    positional = event_dict.pop("positional_args", ())
    record = event_dict.get("_record")
    if not isinstance(record, logging.LogRecord):
        return event_dict
    library = _library(record.name)
    if library is None:
        return event_dict  # other libraries keep their message as the event
    if library == _MCP:
        for key in ("exc_info", "exception", "stack_info"):
            event_dict.pop(key, None)
        event_dict.update(event=_OTHERS[_MCP], message=str(record.msg))
        return event_dict
    named = _NAMED.get((library, str(record.msg)))
    args = positional if isinstance(positional, tuple) else ()
    if named is not None:
        event, fields = named
        try:
            event_dict.update(fields(args), event=event)
            return event_dict
        except (IndexError, TypeError):  # another version's arguments: still named below
            pass
    event_dict["message"] = event_dict["event"]
    event_dict["event"] = _OTHERS[library]
    return event_dict


class DropDuplicates(logging.Filter):
    """A handler filter: APScheduler's own lines for what `JobQueue` reports itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_library(record.name) == _SCHEDULER and str(record.msg) in _DUPLICATES)
