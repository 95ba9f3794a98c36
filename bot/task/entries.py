"""Each conversation entry as one timeline `Entry`: when, kind, actor, summary, tokens,
duration, cost and kind-specific detail (`bot/task/timeline.py` builds the run from them).

Entry kinds (where each is appended):

| kind | actor | from |
|---|---|---|
| `system`, `initial` | bot | the run's start (`bot/task/runner.py` `_initialize`) |
| `reply` | model | a model call (`bot/task/turn.py` `_record`): tokens, duration, cost |
| `tool` | tool | a tool call's result (`turn.py` `_run`): name, ok, a command's outcome, duration |
| `comments`, `skipped` | the authors | comments delivered, or left out (`bot/task/comments.py`) |
| `control` | the authors | `/bot` commands consumed (`bot/task/safepoint.py`) |
| `checks` | bot | failing checks handed back to the model (`runner.py` `_checks`) |
| `nudge` | bot | an empty reply answered (`turn.py`) |
| `summary` | model | older turns compacted (`turn.py` `_messages`): tokens, duration, cost |
| `checks_run` | checks | what the repository's checks did (`bot/task/record.py` `Events.checks`) |
| `published` | bot | branch, commit, request or patch (`bot/task/finishing.py`) |
| `posted` | bot | a comment the bot posted (`bot/task/posting.py` `deliver`) |
| `status` | bot | started, paused, resumed, the end and its reason (`bot/task/lifecycle.py`) |
| `ignored` | the person | a control label from someone who may not give it (`bot/task/gate.py`) |
| `error` | forge, model | a run cut short by an error, to be retried (`runner.py`, `turn.py`) |

A model call (`reply`, `summary`) whose endpoint reported no usage has no tokens and no cost,
and `detail["usage_reported"]` is False: its tokens are in no total.

Summaries are one line of plain text with control characters removed; they may quote the
model's words and name files and commands, so they are for the people who run the bot (the
terminal, the task page), not for the thread: the thread's account is `bot/task/report.py`.
Costs are exact `Decimal`s at the price given (`llm.price`), None without one.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from bot.core.clock import parse_time
from bot.core.pricing import Price

SUMMARY_CHARS = 160


@dataclass(frozen=True)
class Entry:
    """One thing that happened in a run. Tokens, duration and cost are None where the entry
    has none (or was written before they were recorded); `detail` is kind-specific, JSON-able
    data (e.g. `tool_calls` of a reply, `checks` of `checks_run`)."""

    at: datetime | None
    kind: str
    actor: str
    summary: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    duration: float | None = None  # seconds
    cost: Decimal | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "at": iso(self.at),
            "kind": self.kind,
            "actor": self.actor,
            "summary": self.summary,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "duration": self.duration,
            "cost": decimal_text(self.cost),
            "detail": dict(self.detail),
        }


# -- entries ---------------------------------------------------------------------------------


def describe(raw: list[dict[str, Any]], price: Price | None) -> list[Entry]:
    """The conversation's entries as timeline entries, in their order."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}  # tool call id -> name, arguments
    out: list[Entry] = []
    for item in raw:
        for call in item.get("tool_calls") or []:
            function = call.get("function") or {}
            calls[str(call.get("id"))] = (str(function.get("name")), _arguments(function))
        kind = str(item.get("kind") or item.get("role") or "entry")
        actor, summary, detail = _DESCRIBE.get(kind, _other)(item, calls)
        out.append(_entry(item, kind, actor, summary, detail, price))
    return out


def _entry(
    item: Mapping[str, Any],
    kind: str,
    actor: str,
    summary: str,
    detail: dict[str, Any],
    price: Price | None,
) -> Entry:
    usage = item.get("usage") if isinstance(item.get("usage"), dict) else None
    prompt = completion = None
    cost = None
    if item.get("usage_reported") is False:  # the endpoint sent no numbers: none shown
        usage, detail = None, {**detail, "usage_reported": False}
    if usage is not None:
        prompt, completion = (
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
        )
        cost = price.cost(prompt, completion) if price else None
    duration = item.get("duration")
    if kind == "checks_run":
        duration = sum(float(c.get("duration") or 0) for c in detail.get("checks") or [])
    return Entry(
        at=_when(item.get("at")),
        kind=kind,
        actor=clean(actor, 60),
        summary=clean(summary),
        prompt_tokens=prompt,
        completion_tokens=completion,
        duration=float(duration) if isinstance(duration, int | float) else None,
        cost=cost,
        detail=detail,
    )


Described = tuple[str, str, dict[str, Any]]  # actor, summary, detail
Calls = dict[str, tuple[str, dict[str, Any]]]


def _system(item: Mapping[str, Any], calls: Calls) -> Described:
    return "bot", "system prompt", {}


def _initial(item: Mapping[str, Any], calls: Calls) -> Described:
    heard = _heard(item)
    text = "opening context"
    if heard["count"]:
        text += f" with {_comments_phrase(heard)}"
    return "bot", text, heard


def _reply(item: Mapping[str, Any], calls: Calls) -> Described:
    mine = [calls.get(str(c.get("id")), ("?", {})) for c in item.get("tool_calls") or []]
    detail: dict[str, Any] = {"step": item.get("step"), "tool_calls": [n for n, _ in mine]}
    if mine:
        return "model", "calls " + ", ".join(_call_text(n, a) for n, a in mine), detail
    content = str(item.get("content") or "").strip()
    return "model", (f"answers: {content}" if content else "empty reply"), detail


def _tool(item: Mapping[str, Any], calls: Calls) -> Described:
    name, arguments = calls.get(str(item.get("tool_call_id")), (str(item.get("name")), {}))
    ok = item.get("ok")
    outcome = item.get("outcome")
    detail: dict[str, Any] = {"name": name, "target": target(name, arguments), "ok": ok}
    if outcome is not None:
        detail["outcome"] = outcome
    if item.get("journaled"):
        detail["journaled"] = True
    said = outcome or ("ok" if ok is True else "error" if ok is False else "done")
    return "tool", f"{_call_text(name, arguments)}: {said}", detail


def _comments(item: Mapping[str, Any], calls: Calls) -> Described:
    heard = _heard(item)
    return _authors_actor(heard), _comments_phrase(heard), heard


def _skipped(item: Mapping[str, Any], calls: Calls) -> Described:
    heard = _heard(item)
    return _authors_actor(heard), f"{_comments_phrase(heard)}, not shown to the model", heard


def _control(item: Mapping[str, Any], calls: Calls) -> Described:
    heard = _heard(item, "comments", "obeyed")
    commands = [str(c) for c in item.get("commands") or []]
    said = ", ".join(f"/bot {c}" for c in commands) or "no command"
    return _authors_actor(heard), f"commands: {said}", {**heard, "commands": commands}


def _checks_request(item: Mapping[str, Any], calls: Calls) -> Described:
    return "bot", "checks failed: handed back to the model to fix", {}


def _nudge(item: Mapping[str, Any], calls: Calls) -> Described:
    return "bot", "empty reply: asked the model to use a tool or finish", {}


def _summary(item: Mapping[str, Any], calls: Calls) -> Described:
    return (
        "model",
        "older turns compacted into a summary",
        {"covers_until": item.get("covers_until")},
    )


def _checks_run(item: Mapping[str, Any], calls: Calls) -> Described:
    checks = [dict(c) for c in item.get("checks") or [] if isinstance(c, dict)]
    detail = {"enabled": bool(item.get("enabled")), "checks": checks}
    if not item.get("enabled"):
        return "checks", "checks not run (running commands is not enabled)", detail
    if not checks:
        return "checks", "no checks configured", detail
    said = ", ".join(f"{c.get('command')}: {c.get('outcome')}" for c in checks)
    return "checks", f"checks: {said}", detail


def _published(item: Mapping[str, Any], calls: Calls) -> Described:
    detail = {k: item.get(k) for k in ("branch", "repo", "commit", "request", "draft", "patch")}
    if item.get("patch"):
        return "bot", "changes given as a patch in the final comment", detail
    commit = str(item.get("commit") or "")[:12]
    place = f"{item.get('branch')}" + (f" in {item.get('repo')}" if item.get("repo") else "")
    text = f"commit {commit} on {place}"
    if item.get("request"):
        kind = "draft change request" if item.get("draft") else "change request"
        text += f"; {kind} {item.get('request')}"
    return "bot", text, detail


_PURPOSES = {"done": "the final comment", "progress": "the progress comment", "note": "a note"}


def _posted(item: Mapping[str, Any], calls: Calls) -> Described:
    purpose = str(item.get("purpose") or "")
    what = _PURPOSES.get(purpose, f"the {purpose} comment")
    detail = {"purpose": purpose, "comment": item.get("comment"), "seq": item.get("seq")}
    return "bot", f"posted {what} ({item.get('comment')})", detail


def _status(item: Mapping[str, Any], calls: Calls) -> Described:
    status, reason = item.get("status"), item.get("reason")
    detail = {"status": status, "reason": reason}
    if status == "running" and reason in ("started", "resumed"):
        return "bot", str(reason), detail
    return "bot", f"{status}: {reason}" if reason else str(status), detail


_IGNORED = {"labeled": "added the label", "unlabeled": "removed the label"}


def _ignored(item: Mapping[str, Any], calls: Calls) -> Described:
    detail = {k: item.get(k) for k in ("control", "name", "actor")}
    what = f"{_IGNORED.get(str(item.get('control')), item.get('control'))} {item.get('name')}"
    return str(item.get("actor") or "people"), f"ignored: {what} (no write access)", detail


def _error(item: Mapping[str, Any], calls: Calls) -> Described:
    detail = {k: item.get(k) for k in ("source", "error", "retry_at")}
    text = f"error: {item.get('error')}"
    if item.get("retry_at"):
        text += f" (retry at {item.get('retry_at')})"
    return str(item.get("source") or "bot"), text, detail


def _other(item: Mapping[str, Any], calls: Calls) -> Described:
    return "bot", str(item.get("kind") or item.get("role") or "entry"), {}


_DESCRIBE: dict[str, Callable[[Mapping[str, Any], Calls], Described]] = {
    "system": _system,
    "initial": _initial,
    "reply": _reply,
    "tool": _tool,
    "comments": _comments,
    "skipped": _skipped,
    "control": _control,
    "checks": _checks_request,
    "nudge": _nudge,
    "summary": _summary,
    "checks_run": _checks_run,
    "published": _published,
    "posted": _posted,
    "status": _status,
    "ignored": _ignored,
    "error": _error,
}


# -- helpers ---------------------------------------------------------------------------------

# What a tool call is about, by tool: the argument that names it.
_TARGETS = {
    "read_file": "path",
    "write_file": "path",
    "edit_file": "path",
    "list_files": "path",
    "search_code": "pattern",
    "run_command": "command",
}


def target(name: str, arguments: Mapping[str, Any]) -> str | None:
    """The file, pattern or command a tool call is about (None for the others)."""
    argument = _TARGETS.get(name)
    value = arguments.get(argument) if argument else None
    return str(value) if value is not None else None


def _call_text(name: str, arguments: Mapping[str, Any]) -> str:
    about = target(name, arguments)
    return f"{name} {about}" if about is not None else name


def _arguments(function: Mapping[str, Any]) -> dict[str, Any]:
    try:
        parsed = json.loads(function.get("arguments") or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _heard(item: Mapping[str, Any], *fields: str) -> dict[str, Any]:
    """The comments an entry names: each one's id, author and whether it is an internal note,
    their count, authors (once each, in order) and how many are internal notes."""
    refs = [r for f in fields or ("comments",) for r in item.get(f) or [] if isinstance(r, dict)]
    comments: list[dict[str, Any]] = [
        {"id": str(r.get("id")), "author": _author(r), "internal": _internal(r)} for r in refs
    ]
    authors: list[str] = []
    for comment in comments:
        if comment["author"] is not None and comment["author"] not in authors:
            authors.append(comment["author"])
    internal = sum(1 for c in comments if c["internal"])
    return {"count": len(comments), "authors": authors, "internal": internal, "comments": comments}


def _author(ref: Mapping[str, Any]) -> str | None:
    author = ref.get("author")
    return author if isinstance(author, str) else None


def _internal(ref: Mapping[str, Any]) -> bool | None:
    """Whether a comment is an internal note; None (unknown) for a ref written before refs
    named their author and this (the report counts only comments known to be public)."""
    if ref.get("internal"):
        return True
    return False if "author" in ref else None


def _comments_phrase(heard: Mapping[str, Any]) -> str:
    count = int(heard["count"])
    noun = "comment" if count == 1 else "comments"
    authors = heard["authors"]
    text = f"{count} {noun}" + (f" from {', '.join(authors)}" if authors else "")
    if heard["internal"]:
        text += f" ({heard['internal']} internal)"
    return text


def _authors_actor(heard: Mapping[str, Any]) -> str:
    return ", ".join(heard["authors"]) or "people"


_UNPRINTABLE = re.compile(r"\s+")


def clean(text: str, limit: int = SUMMARY_CHARS) -> str:
    """One line of printable text: control and format characters (terminal escapes, bidi
    overrides) become spaces, runs of whitespace one space, and it is cut at `limit`."""
    printable = "".join(" " if unicodedata.category(c)[0] in "CZ" else c for c in text)
    line = _UNPRINTABLE.sub(" ", printable).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def decimal_text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)
