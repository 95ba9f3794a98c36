"""Task state as stored text, the same on both backends: JSON that UTF-8 can encode."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from bot.model.state import TaskState
from bot.store.errors import StateError


def json_text(value: Any, **options: Any) -> str:
    """`value` as JSON text that UTF-8 can encode: non-ASCII kept as written, except lone
    surrogates ("\\ud83d" in a forge's JSON, a cut emoji), which only an escape can carry."""
    text = json.dumps(value, ensure_ascii=False, **options)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(value, **options)
    return text


def parse_state(raw: bytes) -> TaskState:
    """A task.json's content; StateError names what is wrong (never its values)."""
    try:
        return TaskState.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        if first["type"] == "json_invalid":
            raise StateError(f"not valid JSON ({first['msg']})") from None
        where = ".".join(str(part) for part in first["loc"]) or "top level"
        raise StateError(f"not a valid task state: {where}: {first['msg']}") from None


_SURROGATE = re.compile("[\ud800-\udfff]")


def state_json(state: TaskState, indent: int | None = None) -> bytes:
    """A state's JSON, UTF-8. A lone surrogate (a cut emoji escaped in a forge's or a model's
    JSON) cannot be encoded, and pydantic would not read its escape back: it becomes U+FFFD,
    since a state that cannot be saved would stop its task at every cycle."""
    try:
        return state.model_dump_json(indent=indent).encode("utf-8")
    except PydanticSerializationError:
        clean = TaskState.model_validate(_scrub(state.model_dump()))
        return clean.model_dump_json(indent=indent).encode("utf-8")


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value
