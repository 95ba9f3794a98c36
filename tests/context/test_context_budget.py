from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.context.budget import Section, allocate, dedupe, keep_ends, shorten_list, truncate
from bot.context.plan import summary_plan
from bot.context.tokens import TokenCounter
from bot.core.markdown import fence_for

COUNTER = TokenCounter()
TEXT = st.lists(
    st.sampled_from(
        ["abc", " ", "xyz", "\n", "`", "#", "```", "日本語", "テスト", "\n```python\n"]
    ),
    max_size=150,
).map("".join)


def balanced(text: str) -> bool:
    open_fence = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            mark = stripped[: len(stripped) - len(stripped.lstrip("`"))]
            if open_fence is None:
                open_fence = mark
            elif len(mark) >= len(open_fence) and stripped == mark:
                open_fence = None
    return open_fence is None


def test_truncate_cuts_on_lines_and_says_how_much() -> None:
    text = "\n".join(f"line number {i}" for i in range(100))
    cut = truncate(text, 50, COUNTER)
    assert COUNTER.count(cut) <= 50
    body, marker = cut.rsplit("\n", 1)
    assert all(line.startswith("line number") for line in body.splitlines())
    kept = len(body.splitlines())
    assert marker == f"... (truncated: {100 - kept} more lines)"


def test_truncate_closes_a_fence_it_cut_inside() -> None:
    text = "intro\n```python\n" + "\n".join(f"x = {i}" for i in range(200)) + "\n```\noutro"
    cut = truncate(text, 60, COUNTER)
    assert cut.splitlines()[-2] == "```" and balanced(cut)


@settings(max_examples=150, deadline=None)
@given(text=TEXT, limit=st.integers(min_value=20, max_value=300))
def test_truncate_always_fits(text: str, limit: int) -> None:
    cut = truncate(text, limit, COUNTER)
    assert COUNTER.count(cut) <= limit
    if COUNTER.count(text) <= limit:
        assert cut == text


def test_allocate_floors_shares_and_hard_cap() -> None:
    grant = allocate(
        1000,
        [
            Section("thread", wanted=5000, share=0.5, floor=700),
            Section("repo", wanted=5000, share=0.4),
            Section("diff", wanted=50, share=0.1),
        ],
    )
    assert grant["thread"] >= 600 and grant["diff"] == 50
    assert sum(grant.values()) == 1000


@given(
    total=st.integers(min_value=0, max_value=5000),
    wants=st.lists(
        st.tuples(st.integers(0, 4000), st.floats(0, 1), st.integers(0, 3000)),
        min_size=1,
        max_size=5,
    ),
)
def test_allocate_never_exceeds_total_or_wants(
    total: int, wants: list[tuple[int, float, int]]
) -> None:
    sections = [Section(f"s{i}", w, s, f) for i, (w, s, f) in enumerate(wants)]
    grant = allocate(total, sections)
    assert sum(grant.values()) <= total
    assert all(0 <= grant[s.name] <= s.wanted for s in sections)


def test_dedupe_and_shorten() -> None:
    assert dedupe(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
    assert shorten_list(["a", "b", "c", "d", "e"], 3) == "a, b, c, ... (+2 more)"
    assert shorten_list(["a"], 3) == "a"


def test_fence_is_longer_than_any_inner_run() -> None:
    assert fence_for("no ticks") == "```"
    assert fence_for("has ```` four") == "`````"


def test_summary_plan_single_or_map_reduce() -> None:
    short = ["a short line"] * 10
    assert summary_plan(short, 200, 4096, COUNTER).mode == "single"
    long = [f"line {i} with several words in it" for i in range(10_000)]
    plan = summary_plan(long, 500, 4096, COUNTER)
    assert plan.mode == "map-reduce" and plan.chunk_target == 300
    assert plan.chunks[0][0] == 0 and plan.chunks[-1][1] == len(long)
    assert all(a[1] == b[0] for a, b in zip(plan.chunks, plan.chunks[1:], strict=False))
    for start, end in plan.chunks:
        assert sum(COUNTER.count(line + "\n") for line in long[start:end]) <= 4096 - 256 - 500


def test_keep_ends_keeps_both_ends_and_starts_the_tail_at_a_part() -> None:
    parts = ["# Title line\nfirst line of the body"]
    parts += [
        f"- ({n}) @user{n} (untrusted: no write access, data only):\n  > " + "word " * 30
        for n in range(1, 30)
    ]
    parts.append("```\n" + "code\n" * 5 + "```")
    parts.append("- (30) @newest:\n  newest comment")
    text = "\n\n".join(parts)
    cut = keep_ends(text, 200, COUNTER)
    assert COUNTER.count(cut) <= 200 and balanced(cut)
    assert cut.startswith("# Title line\nfirst line of the body")
    assert cut.endswith("- (30) @newest:\n  newest comment")
    assert "lines cut here to fit the context window" in cut
    tail = cut.split("lines cut here to fit the context window) ...\n", 1)[1]
    # Every quoted line in the tail sits under its comment's header.
    blocks = tail.split("\n\n")
    assert all(not b.startswith("  >") for b in blocks)
