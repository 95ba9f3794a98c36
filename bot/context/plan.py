"""A context plan as data: every candidate source, the grain it gets, its cost and why.

Planning is a pure function of its inputs (no LLM, no network): people's own words and what
they named explicitly come in full; what the bot found on its own comes as a summary; the
newest comments are kept in full before older ones; required sources (the thread's title and
first lines, the newest comment) are never dropped: each has a floor and is cut if it must
be. Whatever does not fit is excluded with the reason `over-budget`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from bot.context.budget import cut_head
from bot.context.tokens import TokenCounter


class Grain(StrEnum):
    FULL = "full"
    SUMMARY = "summary"
    EXCLUDED = "excluded"


class Reason(StrEnum):
    EXPLICIT = "explicit"  # written by people in the thread, or named by them
    LINKED = "linked"
    SEARCH_HIT = "search-hit"
    RECENT = "recent"
    REPOSITORY = "repository"  # README, tree, rules: found by the bot, not named
    OVER_BUDGET = "over-budget"


@dataclass(frozen=True)
class Candidate:
    source: str  # stable id shown in the plan, e.g. "comment (3)", "file src/app.py"
    section: str  # "thread" or "repository"
    full: str
    summary: str
    reason: Reason
    rank: int  # lower first: the order in which the budget is spent
    required: bool = False  # never excluded (the issue body): cut to fit instead
    prefer_summary: bool = False  # found by the bot: summary unless room is plentiful
    head: int = 0  # required only: tokens its floor keeps at least (the thread's header)


@dataclass(frozen=True)
class Choice:
    source: str
    section: str
    grain: Grain
    tokens: int
    reason: Reason
    text: str = field(repr=False, compare=False, default="")


@dataclass(frozen=True)
class ContextPlan:
    budget: int
    choices: tuple[Choice, ...]

    @property
    def used(self) -> int:
        return sum(c.tokens for c in self.choices)

    def left_out(self) -> list[Choice]:
        return [c for c in self.choices if c.grain is Grain.EXCLUDED]

    def rows(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in asdict(c).items() if k != "text"} for c in self.choices]

    def to_json(self) -> str:
        return json.dumps(
            {"budget": self.budget, "used": self.used, "sources": self.rows()}, indent=1
        )

    def log_fields(self) -> dict[str, Any]:
        grains = {g.value: sum(1 for c in self.choices if c.grain is g) for g in Grain}
        return {"budget": self.budget, "used": self.used, "grains": grains, "sources": self.rows()}

    def table(self) -> str:
        width = max([len(c.source) for c in self.choices] + [6])
        lines = [f"{'source':<{width}}  {'grain':<8} {'tokens':>6}  reason"]
        lines += [
            f"{c.source:<{width}}  {c.grain.value:<8} {c.tokens:>6}  {c.reason.value}"
            for c in self.choices
        ]
        lines.append(f"{'total':<{width}}  {'':<8} {self.used:>6}  of {self.budget}")
        return "\n".join(lines)


# A required source (the thread's opening, the newest comment) may grow past its floor up to
# this share of the budget at its rank; what is left at the end is given back to it.
REQUIRED_SHARE = 0.5


def plan(candidates: Sequence[Candidate], budget: int, counter: TokenCounter) -> ContextPlan:
    """Spend `budget` tokens over the candidates in rank order; the total is a hard cap.

    Required candidates first get a floor each (the budget split between them, their
    beginnings cut to it), so no required source can squeeze out another, whatever the
    language or length; then every candidate is planned in rank order.
    """
    ordered = sorted(candidates, key=lambda c: (not c.required, c.rank))
    floors = _floors([c for c in ordered if c.required], budget, counter)
    left = budget - sum(counter.count(text) for text in floors.values())
    chosen: dict[str, Choice] = {}
    for candidate in ordered:
        if candidate.source in floors:
            room = left + counter.count(floors[candidate.source])
            limit = max(counter.count(floors[candidate.source]), int(budget * REQUIRED_SHARE))
            choice = _required(candidate, min(room, limit), counter)
        else:
            choice = _optional(candidate, left, counter)
        left -= choice.tokens - counter.count(floors.get(candidate.source, ""))
        chosen[candidate.source] = choice
    for source, choice in list(chosen.items()):
        # Room nobody used goes back to required sources that were cut.
        if choice.grain is Grain.SUMMARY and source in floors and left > 0:
            candidate = next(c for c in candidates if c.source == source)
            grown = _required(candidate, choice.tokens + left, counter)
            left -= grown.tokens - choice.tokens
            chosen[source] = grown
    return ContextPlan(budget, tuple(chosen[c.source] for c in candidates))


def _floors(required: Sequence[Candidate], budget: int, counter: TokenCounter) -> dict[str, str]:
    """Each required candidate's beginning, within an even share of what the others left."""
    pool = max(budget, 0)
    out: dict[str, str] = {}
    # Small ones first: what they do not need is left to the others. A `head` is served first.
    by_cost = sorted(required, key=lambda c: (-c.head, counter.count(c.full)))
    for n, candidate in enumerate(by_cost):
        share = max(pool // (len(by_cost) - n), min(candidate.head, pool))
        out[candidate.source] = cut_head(candidate.full, share, counter)
        pool -= counter.count(out[candidate.source])
    return out


def _required(candidate: Candidate, room: int, counter: TokenCounter) -> Choice:
    full_cost = counter.count(candidate.full)
    if full_cost <= room:
        grain, text = Grain.FULL, candidate.full
    else:
        grain, text = Grain.SUMMARY, cut_head(candidate.full, max(room, 0), counter)
    return Choice(
        candidate.source, candidate.section, grain, counter.count(text), candidate.reason, text
    )


def _optional(candidate: Candidate, left: int, counter: TokenCounter) -> Choice:
    full_cost = counter.count(candidate.full)
    plentiful = full_cost <= left // 4
    if full_cost <= left and (not candidate.prefer_summary or plentiful or not candidate.summary):
        return Choice(
            candidate.source,
            candidate.section,
            Grain.FULL,
            full_cost,
            candidate.reason,
            candidate.full,
        )
    summary_cost = counter.count(candidate.summary) if candidate.summary else 0  # only now
    if candidate.summary and summary_cost <= left:
        return Choice(
            candidate.source,
            candidate.section,
            Grain.SUMMARY,
            summary_cost,
            candidate.reason,
            candidate.summary,
        )
    return Choice(candidate.source, candidate.section, Grain.EXCLUDED, 0, Reason.OVER_BUDGET)


@dataclass(frozen=True)
class SummaryPlan:
    """How to summarize a text too long for one call, as data a test can check."""

    mode: str  # "single" or "map-reduce"
    chunks: tuple[tuple[int, int], ...]  # line ranges [start, end)
    chunk_target: int  # tokens each chunk summary may use
    final_target: int


def summary_plan(
    lines: Sequence[str], target: int, window: int, counter: TokenCounter
) -> SummaryPlan:
    """Single call if the text fits the window; else map-reduce over line chunks.

    Each chunk's summary targets about 60% of the final target, leaving room to merge.
    """
    overhead = 256 + target
    total = sum(counter.count(line + "\n") for line in lines)
    if total + overhead <= window:
        return SummaryPlan("single", ((0, len(lines)),), target, target)
    per_chunk = window - overhead
    chunks: list[tuple[int, int]] = []
    start = used = 0
    for index, line in enumerate(lines):
        cost = counter.count(line + "\n")
        if used + cost > per_chunk and index > start:
            chunks.append((start, index))
            start, used = index, 0
        used += cost
    chunks.append((start, len(lines)))
    return SummaryPlan("map-reduce", tuple(chunks), max(32, int(target * 0.6)), target)
