"""The "What I did" section that ends the final comment: the run's timeline, told publicly.

It is made from the same view as `bot show` (`bot/task/timeline.py`) and says only what the
thread's readers could see for themselves, or our own counts: steps, tools called (counted by
name), files read and changed, commands and checks with their outcomes (in our words: never
what they printed), comments heard (a count and the authors; never an internal note, not even
that one exists), duration, tokens and cost.

Every name that came from the model or the repository (a path a fork's code wrote, a command
the model chose, a login) first passes `public` (the caller's: internal-note text withheld,
secrets redacted; bot/task/runner.py), whole, before it is cut to length, so that no part of a
secret survives the cut; then it is shown inside a code span on one line, so no Markdown, HTML
or mention in it takes effect. A run of an internal note spread over two names is found by
reading the whole section once more: such a section lists no names at all, since withholding
it later, as every post is (`Poster.withhold`, bot/task/posting.py), could take out a code
span's closing backticks and let the rest render. `agent.report: false` leaves the section
out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from bot.core.pricing import shown
from bot.task.entries import Entry, clean
from bot.task.timeline import Timeline, Totals

TITLE = "What I did"
MOST = 20  # names listed per line; the rest are counted
NAME_CHARS = 120
HIDDEN = "(name withheld)"
_TICKS = re.compile(r"`+")

Public = Callable[[str], str]


def _same(text: str) -> str:
    return text


def what_i_did(
    timeline: Timeline,
    changes: Mapping[str, str | None],
    now: datetime,
    public: Public = _same,
) -> str:
    """The collapsed section, to append to the final comment (it starts with blank lines).
    `public`: what a name from outside becomes before it is shown (identity by default)."""
    section = _Section(timeline, changes, now, _Names(public)).text()
    if public(section) != section:  # a run split over two names: show none of them
        section = _Section(timeline, changes, now, _Names(public, hide=True)).text()
    return section


def code(text: str) -> str:
    """`text` as an inline code span that nothing in it can end: one line, printable, cut,
    fenced with more backticks than any run inside (CommonMark, "Code spans")."""
    line = clean(text, NAME_CHARS) or "(empty)"
    fence = "`" * (max((len(m) for m in _TICKS.findall(line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


class _Names:
    """How names from outside are shown: made public, then in a code span (or not at all)."""

    def __init__(self, public: Public, hide: bool = False) -> None:
        self.public = public
        self.hide = hide

    def one(self, name: str) -> str:
        return HIDDEN if self.hide else code(self.public(name))

    def listed(self, names: Iterable[str]) -> str:
        unique = list(dict.fromkeys(names))
        if self.hide:
            return f"{len(unique)} {'name' if len(unique) == 1 else 'names'} withheld"
        more = f" and {len(unique) - MOST} more" if len(unique) > MOST else ""
        return ", ".join(self.one(n) for n in unique[:MOST]) + more


class _Section:
    def __init__(
        self,
        timeline: Timeline,
        changes: Mapping[str, str | None],
        now: datetime,
        names: _Names,
    ) -> None:
        self.timeline = timeline
        self.entries = timeline.entries
        self.changes = changes
        self.now = now
        self.names = names

    def text(self) -> str:
        lines = [self._steps(), self._tokens(), self._tools(), self._files_read()]
        lines += [self._changed(), self._commands(), self._checks(), self._heard()]
        body = "\n".join(f"- {line}" for line in lines if line)
        return f"\n\n<details><summary>{TITLE}</summary>\n\n{body}\n\n</details>"

    def _steps(self) -> str:
        calls = self.timeline.step or 0
        text = f"Steps: {calls} model call{'s' if calls != 1 else ''}"
        if self.timeline.started is not None:
            text += f" in {duration((self.now - self.timeline.started).total_seconds())}"
        return text

    def _tokens(self) -> str:
        text = f"Tokens: {_amount(self.timeline.totals)}"
        if self.timeline.runs > 1:
            text += f"; all {self.timeline.runs} runs: {_amount(self.timeline.task_totals)}"
        unknown = unreported(self.entries)
        if unknown:
            calls = "model call" if unknown == 1 else "model calls"
            text += f"; {unknown} {calls} reported no usage (not counted)"
        return text

    def _tools(self) -> str:
        counted = Counter(str(e.detail.get("name")) for e in self.entries if e.kind == "tool")
        if not counted:
            return ""
        ranked = sorted(counted.items(), key=lambda kv: (-kv[1], kv[0]))
        said = ", ".join(f"{self.names.one(name)} ({n})" for name, n in ranked[:MOST])
        more = f" and {len(ranked) - MOST} more" if len(ranked) > MOST else ""
        return "Tools called: " + said + more

    def _files_read(self) -> str:
        paths = [
            str(e.detail["target"])
            for e in self.entries
            if e.kind == "tool"
            and e.detail.get("name") == "read_file"
            and e.detail.get("ok")
            and e.detail.get("target") is not None
        ]
        return f"Files read: {self.names.listed(paths)}" if paths else ""

    def _changed(self) -> str:
        if not self.changes:
            return ""
        kept = sorted(p for p, text in self.changes.items() if text is not None)
        gone = sorted(p for p, text in self.changes.items() if text is None)
        parts = [self.names.listed(kept)] if kept else []
        if gone:
            parts.append(f"deleted {self.names.listed(gone)}")
        return "Files changed: " + "; ".join(parts)

    def _commands(self) -> str:
        ran = [
            f"{self.names.one(str(e.detail.get('target') or '(no command)'))}: "
            + _outcome(self.names, e.detail.get("outcome"), "not run")
            for e in self.entries
            if e.kind == "tool" and e.detail.get("name") == "run_command"
        ]
        if not ran:
            return ""
        more = f" and {len(ran) - MOST} more" if len(ran) > MOST else ""
        return "Commands: " + ", ".join(ran[:MOST]) + more

    def _checks(self) -> str:
        rounds = [e for e in self.entries if e.kind == "checks_run"]
        if not rounds:
            return ""
        last = rounds[-1].detail
        if not last.get("enabled"):
            return "Checks ran: none (running commands is not enabled)"
        checks = list(last.get("checks") or [])
        if not checks:
            return "Checks ran: none configured"
        said = ", ".join(self._check(c) for c in checks[:MOST])
        again = f" (round {len(rounds)})" if len(rounds) > 1 else ""
        return f"Checks ran{again}: {said}"

    def _check(self, check: Mapping[str, object]) -> str:
        name = self.names.one(str(check.get("command")))
        outcome = _outcome(self.names, check.get("outcome"), "unknown")
        took = check.get("duration")
        return f"{name}: {outcome} ({duration(took if isinstance(took, int | float) else 0)})"

    def _heard(self) -> str:
        """Comments known to be public, once each; internal notes neither counted nor named."""
        heard: dict[str, str | None] = {}
        for entry in self.entries:
            if entry.kind not in ("initial", "comments", "skipped", "control"):
                continue
            for comment in entry.detail.get("comments") or []:
                if comment.get("internal") is False:
                    heard[str(comment.get("id"))] = comment.get("author")
        if not heard:
            return ""
        authors = [a for a in heard.values() if a]
        named = f", from {self.names.listed(authors)}" if authors else ""
        return f"Comments heard: {len(heard)}{named}"


def unreported(entries: Iterable[Entry]) -> int:
    """Model calls whose endpoint reported no usage: their tokens are in no total."""
    return sum(1 for e in entries if e.detail.get("usage_reported") is False)


def _amount(totals: Totals) -> str:
    text = (
        f"{totals.tokens:,} ({totals.prompt_tokens:,} prompt, "
        f"{totals.completion_tokens:,} completion)"
    )
    if totals.cost is not None and totals.currency is not None:
        text += f", cost {shown(totals.cost, totals.currency)}"
    return text


# A command's or check's outcome is in our own words (bot/jail/process.py
# `CommandResult.outcome`), never text the command printed; one that holds more than these
# characters (a system error naming a path, say) is shown as a name is, in a code span.
_PLAIN = re.compile(r"[A-Za-z0-9 ():,.-]{1,80}")


def _outcome(names: _Names, value: object, fallback: str) -> str:
    text = clean(str(value), NAME_CHARS) if value is not None else ""
    if not text:
        return fallback
    return text if _PLAIN.fullmatch(text) else names.one(text)


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
