"""Time: forge timestamps (whole seconds, UTC) to datetimes and back."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(value: str | None) -> datetime:
    """Parse the ISO-8601 timestamps both forges return; always timezone-aware UTC."""
    if not value:
        return datetime.fromtimestamp(0, UTC)
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
