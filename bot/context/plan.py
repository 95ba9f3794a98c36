"""A context plan as data: every candidate source, the grain it gets, its cost and why.

Planning is a pure function of its inputs (no LLM, no network): people's own words and what
they named explicitly come in full; what the bot found on its own comes as a summary; the
newest comments are kept in full before older ones; the issue body is never dropped (it is cut
if it must be). Whatever does not fit is excluded with the reason `over-budget`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from bot.context.budget import truncate
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


def plan(candidates: Sequence[Candidate], budget: int, counter: TokenCounter) -> ContextPlan:
    """Spend `budget` tokens over the candidates in rank order; the total is a hard cap."""
    left = budget
    chosen: dict[str, Choice] = {}
    ordered = sorted(candidates, key=lambda c: (not c.required, c.rank))
    for candidate in ordered:
        full_cost = counter.count(candidate.full)
        summary_cost = counter.count(candidate.summary) if candidate.summary else 0
        plentiful = full_cost <= left // 4
        if candidate.required and full_cost > left:
            text = truncate(candidate.full, max(left, 0), counter)
            choice = Choice(
                candidate.source,
                candidate.section,
                Grain.SUMMARY,
                counter.count(text),
                candidate.reason,
                text,
            )
        elif full_cost <= left and (
            not candidate.prefer_summary or plentiful or not candidate.summary
        ):
            choice = Choice(
                candidate.source,
                candidate.section,
                Grain.FULL,
                full_cost,
                candidate.reason,
                candidate.full,
            )
        elif candidate.summary and summary_cost <= left:
            choice = Choice(
                candidate.source,
                candidate.section,
                Grain.SUMMARY,
                summary_cost,
                candidate.reason,
                candidate.summary,
            )
        else:
            choice = Choice(
                candidate.source, candidate.section, Grain.EXCLUDED, 0, Reason.OVER_BUDGET
            )
        left -= choice.tokens
        chosen[candidate.source] = choice
    return ContextPlan(budget, tuple(chosen[c.source] for c in candidates))


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
