"""`bot show`: a task run's timeline in the terminal (colour on a TTY), as JSON, or followed.

Everything comes from the store (`bot/task/timeline.py`), so it works beside a running daemon,
on any machine that reaches the store, and after a restart. `--follow` reads the store again
every second while the task runs, prints what was added and keeps one progress line (status,
step, tokens, cost, last activity) at the bottom: rewritten in place on a TTY, printed when it
changes otherwise; an earlier run (`--run N`) has ended and is printed once. Nothing printed
carries a control character from a forge or the model (the timeline's summaries and the
reason are cleaned; `--json` escapes everything outside ASCII), so a comment cannot drive the
terminal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TextIO

from bot.core.pricing import Price, shown
from bot.model.thread import TaskKey
from bot.store.base import Store
from bot.task.entries import clean
from bot.task.report import duration, unreported
from bot.task.timeline import Entry, Timeline, Totals, build_timeline

FOLLOW_SECONDS = 1.0
_RESET = "\x1b[0m"
_COLOURS = {
    "reply": "36",  # cyan: the model
    "summary": "36",
    "tool": "33",  # yellow
    "comments": "35",  # magenta: people
    "skipped": "35",
    "control": "35",
    "ignored": "35",
    "checks_run": "34",  # blue
    "published": "32",  # green
    "error": "31",  # red
}
_STATUS_COLOURS = {"done": "32", "running": "32", "failed": "31", "paused": "33", "stopped": "33"}


class Painter:
    """ANSI colours, or none (not a TTY)."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, colour: str | None) -> str:
        return f"\x1b[{colour}m{text}{_RESET}" if self.on and colour else text

    def dim(self, text: str) -> str:
        return self(text, "2")


@dataclass(frozen=True)
class Options:
    """How `bot show` prints: `tty` (the progress line rewritten in place), `colour`."""

    as_json: bool = False
    follow: bool = False
    tty: bool = False
    colour: bool = False


def command(
    store: Store,
    key: TaskKey,
    run: int | None,
    price: Price | None,
    out: TextIO,
    options: Options,
    wait: Callable[[float], bool],
) -> Timeline:
    """`bot show`: the run's timeline printed to `out`, followed while it runs when asked
    (an earlier run has ended: it is printed once). Raises `TimelineError` for a task or run
    the store does not have."""
    timeline = build_timeline(store, key, run, price)
    if options.follow and timeline.current:
        screen = Screen(out, options.tty, quiet=options.as_json)
        timeline = follow(store, key, price, screen, Painter(options.colour), wait, timeline)
    elif not options.as_json:
        out.write(render(timeline, Painter(options.colour)) + "\n")
    if options.as_json:
        out.write(timeline.json_text() + "\n")
    out.flush()
    return timeline


def render(timeline: Timeline, paint: Painter) -> str:
    """The whole timeline as text: a header, one line per entry, the totals."""
    lines = [*header(timeline, paint), columns(timeline)]
    lines += [line(entry, timeline, paint) for entry in timeline.entries]
    return "\n".join([*lines, *footer(timeline)])


def header(timeline: Timeline, paint: Painter) -> list[str]:
    status = timeline.status or "ended"
    first = f"{timeline.key}  run {timeline.run} of {timeline.runs}  "
    first += paint(status, _STATUS_COLOURS.get(status))
    if timeline.reason and timeline.status != "running":
        first += f" ({clean(timeline.reason)})"  # it may quote an endpoint's or forge's words
    second = f"started {_stamp(timeline.started, date=True)}"
    second += f"  last activity {_stamp(timeline.last_activity, date=True)}"
    if timeline.elapsed is not None:
        second += f"  {duration(timeline.elapsed)} elapsed"
    second += f", {duration(timeline.busy_seconds)} busy"
    if timeline.holder:
        second += f"  worked by {timeline.holder}"
    return [first, second, ""]


def columns(timeline: Timeline) -> str:
    cost = f"  {'cost ' + timeline.totals.currency:>12}" if timeline.totals.currency else ""
    return f"{'time':<8}  {'kind':<10}  {'actor':<10}  {'tokens':>13}  {'took':>8}{cost}  summary"


def line(entry: Entry, timeline: Timeline, paint: Painter) -> str:
    tokens = ""
    if entry.prompt_tokens is not None:
        tokens = f"{entry.prompt_tokens:,}+{entry.completion_tokens or 0:,}"
    elif entry.detail.get("usage_reported") is False:
        tokens = "unreported"
    took = duration(entry.duration) if entry.duration is not None else ""
    cost = f"  {_cost(entry.cost):>12}" if timeline.totals.currency else ""
    colour = _COLOURS.get(entry.kind)
    if entry.kind == "status":
        colour = _STATUS_COLOURS.get(str(entry.detail.get("status")))
    kind = paint(f"{entry.kind:<10}", colour)
    actor = entry.actor if len(entry.actor) <= 10 else entry.actor[:9] + "…"
    when = paint.dim(_stamp(entry.at))
    return f"{when:<8}  {kind}  {actor:<10}  {tokens:>13}  {took:>8}{cost}  {entry.summary}"


def footer(timeline: Timeline) -> list[str]:
    lines = ["", f"run {timeline.run}: {_totals(timeline.totals)}"]
    unknown = unreported(timeline.entries)
    if unknown:
        lines[-1] += f"; {unknown} model call{'' if unknown == 1 else 's'} reported no usage"
    if timeline.runs > 1:
        lines.append(f"task, all {timeline.runs} runs: {_totals(timeline.task_totals)}")
    return lines


def progress(timeline: Timeline) -> str:
    """The one line `--follow` keeps at the bottom while the task runs."""
    text = f"{timeline.status or 'ended'}: step {timeline.step or 0}"
    text += f", {timeline.totals.tokens:,} tokens"
    if timeline.totals.cost is not None and timeline.totals.currency:
        text += f", {shown(timeline.totals.cost, timeline.totals.currency)}"
    return text + f", last activity {_stamp(timeline.last_activity)}"


def follow(
    store: Store,
    key: TaskKey,
    price: Price | None,
    screen: Screen,
    paint: Painter,
    wait: Callable[[float], bool],
    timeline: Timeline | None = None,
) -> Timeline:
    """Print the current run and what it adds until the task is no longer running (or `wait`,
    called between reads, returns True); the last timeline read. `timeline`: the first read,
    when the caller has it."""
    if timeline is None:
        timeline = build_timeline(store, key, price=price)
    screen.say(*header(timeline, paint), columns(timeline))
    printed, run = 0, timeline.run
    while True:
        if timeline.run != run:  # handed back meanwhile: a new run, from its first entry
            screen.say("", *header(timeline, paint), columns(timeline))
            printed, run = 0, timeline.run
        screen.say(*(line(e, timeline, paint) for e in timeline.entries[printed:]))
        printed = len(timeline.entries)
        if timeline.status != "running":
            break
        screen.progress(progress(timeline))
        if wait(FOLLOW_SECONDS):
            break
        timeline = build_timeline(store, key, price=price)
    screen.say(*footer(timeline))
    return timeline


class Screen:
    """Lines, and the progress line below them: on a TTY one line rewritten in place (cleared
    before anything else is printed), otherwise a line printed whenever it changes. `quiet`:
    nothing at all (`--json --follow` prints only the final JSON)."""

    def __init__(self, out: TextIO, tty: bool, quiet: bool = False) -> None:
        self.out, self.tty, self.quiet = out, tty, quiet
        self.shown = ""  # the progress line on screen now (TTY) or printed last

    def say(self, *lines: str) -> None:
        if self.quiet or not lines:
            return
        if self.tty and self.shown:
            self.out.write("\r\x1b[K")
            self.shown = ""
        self.out.write("".join(f"{text}\n" for text in lines))
        self.out.flush()

    def progress(self, text: str) -> None:
        if self.quiet or text == self.shown:
            return
        self.out.write(f"\r\x1b[K{text}" if self.tty else f"{text}\n")
        self.out.flush()
        self.shown = text


def _totals(totals: Totals) -> str:
    text = f"{totals.calls} model call{'' if totals.calls == 1 else 's'}, {totals.tokens:,} tokens "
    text += f"({totals.prompt_tokens:,} prompt, {totals.completion_tokens:,} completion)"
    if totals.cost is not None and totals.currency:
        text += f", {shown(totals.cost, totals.currency)}"
    return text


def _cost(cost: Decimal | None) -> str:
    return shown(cost, "").strip() if cost is not None else ""


def _stamp(at: datetime | None, date: bool = False) -> str:
    if at is None:
        return "--:--:--" if not date else "unknown"
    return f"{at:%Y-%m-%d %H:%M:%S}Z" if date else f"{at:%H:%M:%S}"
