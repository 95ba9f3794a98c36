"""The "What I did" section that ends the final comment: the run's timeline, told publicly.

It is made from the same view as `bot show` (`bot/task/timeline.py`) and says only what the
thread's readers could see for themselves, or our own counts: steps, tools called (counted by
name), files read and changed, commands and checks with their outcomes (in our words: never
what they printed), comments heard (a count and the authors; never an internal note, not even
that one exists), duration, tokens and cost. Every name that came from the model or the
repository (a path a fork's code wrote, a command the model chose, a login) is shown inside a
code span on one line, so no Markdown, HTML or mention in it takes effect. The whole comment
passes `Poster.withhold` like every post (bot/task/posting.py), which removes any copy of an
internal note's text. `agent.report: false` leaves the section out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime

from bot.core.pricing import shown
from bot.task.entries import Entry, clean
from bot.task.timeline import Timeline, Totals

TITLE = "What I did"
MOST = 20  # names listed per line; the rest are counted
NAME_CHARS = 120
_TICKS = re.compile(r"`+")


def what_i_did(timeline: Timeline, changes: Mapping[str, str | None], now: datetime) -> str:
    """The collapsed section, to append to the final comment (it starts with blank lines)."""
    lines = [_steps(timeline, now), _tokens(timeline)]
    lines += [_tools(timeline.entries), _files_read(timeline.entries), _changed(changes)]
    lines += [_commands(timeline.entries), _checks(timeline.entries), _heard(timeline.entries)]
    body = "\n".join(f"- {line}" for line in lines if line)
    return f"\n\n<details><summary>{TITLE}</summary>\n\n{body}\n\n</details>"


def code(text: str) -> str:
    """`text` as an inline code span that nothing in it can end: one line, printable, cut,
    fenced with more backticks than any run inside (CommonMark, "Code spans")."""
    line = clean(text, NAME_CHARS) or "(empty)"
    fence = "`" * (max((len(m) for m in _TICKS.findall(line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def _listed(names: Iterable[str]) -> str:
    unique = list(dict.fromkeys(names))
    more = f" and {len(unique) - MOST} more" if len(unique) > MOST else ""
    return ", ".join(code(n) for n in unique[:MOST]) + more


def _steps(timeline: Timeline, now: datetime) -> str:
    calls = timeline.step or 0
    text = f"Steps: {calls} model call{'s' if calls != 1 else ''}"
    if timeline.started is not None:
        text += f" in {duration((now - timeline.started).total_seconds())}"
    return text


def _tokens(timeline: Timeline) -> str:
    text = f"Tokens: {_amount(timeline.totals)}"
    if timeline.runs > 1:
        text += f"; all {timeline.runs} runs: {_amount(timeline.task_totals)}"
    return text


def _amount(totals: Totals) -> str:
    text = (
        f"{totals.tokens:,} ({totals.prompt_tokens:,} prompt, "
        f"{totals.completion_tokens:,} completion)"
    )
    if totals.cost is not None and totals.currency is not None:
        text += f", cost {shown(totals.cost, totals.currency)}"
    return text


def _tools(entries: Iterable[Entry]) -> str:
    counted = Counter(str(e.detail.get("name")) for e in entries if e.kind == "tool")
    if not counted:
        return ""
    ranked = sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))
    return "Tools called: " + ", ".join(f"{code(name)} ({n})" for name, n in ranked[:MOST])


def _files_read(entries: Iterable[Entry]) -> str:
    paths = [
        str(e.detail["target"])
        for e in entries
        if e.kind == "tool"
        and e.detail.get("name") == "read_file"
        and e.detail.get("ok")
        and e.detail.get("target") is not None
    ]
    return f"Files read: {_listed(paths)}" if paths else ""


def _changed(changes: Mapping[str, str | None]) -> str:
    if not changes:
        return ""
    kept = sorted(p for p, text in changes.items() if text is not None)
    gone = sorted(p for p, text in changes.items() if text is None)
    parts = [_listed(kept)] if kept else []
    if gone:
        parts.append(f"deleted {_listed(gone)}")
    return "Files changed: " + "; ".join(parts)


def _commands(entries: Iterable[Entry]) -> str:
    ran = [
        f"{code(str(e.detail.get('target') or '(no command)'))}: "
        + str(e.detail.get("outcome") or "not run")
        for e in entries
        if e.kind == "tool" and e.detail.get("name") == "run_command"
    ]
    if not ran:
        return ""
    more = f" and {len(ran) - MOST} more" if len(ran) > MOST else ""
    return "Commands: " + ", ".join(ran[:MOST]) + more


def _checks(entries: Iterable[Entry]) -> str:
    rounds = [e for e in entries if e.kind == "checks_run"]
    if not rounds:
        return ""
    last = rounds[-1].detail
    if not last.get("enabled"):
        return "Checks ran: none (running commands is not enabled)"
    checks = list(last.get("checks") or [])
    if not checks:
        return "Checks ran: none configured"
    said = ", ".join(
        f"{code(str(c.get('command')))}: {c.get('outcome')} ({duration(c.get('duration') or 0)})"
        for c in checks[:MOST]
    )
    again = f" (round {len(rounds)})" if len(rounds) > 1 else ""
    return f"Checks ran{again}: {said}"


def _heard(entries: Iterable[Entry]) -> str:
    """Comments known to be public, once each; internal notes are neither counted nor named."""
    heard: dict[str, str | None] = {}
    for entry in entries:
        if entry.kind not in ("initial", "comments", "skipped", "control"):
            continue
        for comment in entry.detail.get("comments") or []:
            if comment.get("internal") is False:
                heard[str(comment.get("id"))] = comment.get("author")
    if not heard:
        return ""
    authors = [a for a in heard.values() if a]
    named = f", from {_listed(authors)}" if authors else ""
    return f"Comments heard: {len(heard)}{named}"


def duration(seconds: float) -> str:
    """`45 s`, `3 min 5 s`, `2 h 4 min`; tenths below ten seconds."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"
