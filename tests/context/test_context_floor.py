"""Hole 6: the opening context always holds the thread's title and first lines and the newest
human comment, in English or Japanese, for any window from 2,048 tokens up, never exceeds its
share of the window (the project's real tokenizer), and names what it left out."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.agent.plan_tool import plan_tool
from bot.agent.repo_tools import repo_tools
from bot.agent.tools import Toolbox, finish_tool, post_comment_tool, read_comments_tool
from bot.context.engine import initial_context, opening_budget
from bot.context.plan import Grain
from bot.context.tokens import TokenCounter
from bot.context.window import truncate_text
from bot.core.prompts import load_prompt
from bot.model.thread import Comment, Kind, Permission, Platform, TaskKey, Thread
from bot.model.trust import NewComment
from bot.repo.workspace import Workspace
from tests.conftest import REPO

COUNTER = TokenCounter()
T0 = datetime(2026, 1, 1, tzinfo=UTC)
ENGLISH = ["the", "login", "page", "fails", "when", "users", "click", "submit", "again", "error"]
JAPANESE = [
    "ログイン",
    "画面で",
    "エラーが",
    "発生します",
    "再現手順",
    "を追記しました",
    "確認",
    "してください",
]


def text(words: list[str], joiner: str) -> st.SearchStrategy[str]:
    """Paragraphs of words; Japanese runs together with no spaces (one long line each)."""
    line = st.lists(st.sampled_from(words), min_size=1, max_size=120).map(joiner.join)
    sentence_end = "。" if joiner == "" else "."
    return st.lists(line.map(lambda s: s + sentence_end), min_size=1, max_size=6).map("\n".join)


@st.composite
def threads(draw: st.DrawFn) -> tuple[str, str, list[tuple[str, bool]]]:
    japanese = draw(st.booleans())
    words, joiner = (JAPANESE, "") if japanese else (ENGLISH, " ")
    title = draw(st.lists(st.sampled_from(words), min_size=1, max_size=8).map(joiner.join))
    long = st.tuples(text(words, joiner), st.integers(1, 25)).map(
        lambda t: "\n".join([t[0]] * t[1])
    )
    body = draw(long)
    comments = draw(st.lists(st.tuples(long, st.booleans()), max_size=30))
    return title, body, comments


def system_and_tools(workspace: Workspace) -> int:
    """What the runner puts before the opening context: the real system prompt and tools."""
    system = load_prompt("system.md").format(
        bot_login="coding-bot", task_ref=f"github:{REPO}#1", repo=REPO, repo_rules="(none)"
    )
    tools = [finish_tool(), post_comment_tool(lambda b, c: ""), read_comments_tool(lambda n: "")]
    tools.append(plan_tool(None, lambda: None))  # type: ignore[arg-type]
    tools += repo_tools(workspace, COUNTER, 2000, trusted=True)
    specs = [s.openai() for s in Toolbox(tools).specs()]
    return COUNTER.count(system) + COUNTER.tools(specs)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root: Path = tmp_path_factory.mktemp("snap")
    (root / "src").mkdir()
    (root / "src" / "login.py").write_text("def submit(form):\n    return form.errors\n" * 40)
    (root / "README.md").write_text("# App\n\n## Login\n\nThe login page.\n" * 30)
    return Workspace(root, {})


def comment(n: int, body: str, trusted: bool) -> NewComment:
    at = T0 + timedelta(minutes=n)
    perm = Permission.WRITE if trusted else Permission.NONE
    return NewComment(Comment(f"issue:{100 + n}", f"user{n}", body, at, at, perm), False, trusted)


def left_out_comments(rendered: str) -> set[int]:
    match = re.search(r"^Left out \(over budget\): comments? ([\d, -]+)", rendered, re.MULTILINE)
    numbers: set[int] = set()
    for part in match.group(1).split(",") if match else []:
        low, _, high = part.strip().partition("-")
        if low:
            numbers |= set(range(int(low), int(high or low) + 1))
    return numbers


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    thread_parts=threads(),
    window=st.integers(min_value=2048, max_value=32768),
    author_trusted=st.booleans(),
)
def test_opening_keeps_title_first_lines_and_newest_comment(
    workspace: Workspace,
    thread_parts: tuple[str, str, list[tuple[str, bool]]],
    window: int,
    author_trusted: bool,
) -> None:
    title, body, raw = thread_parts
    prompt_budget = window - window // 4  # the largest reserve the config allows, and then some
    fixed = system_and_tools(workspace)
    budget = opening_budget(prompt_budget, fixed)
    key = TaskKey(Platform.GITHUB, REPO, Kind.ISSUE, 1)
    thread = Thread(key, title, body, "alice", "open", frozenset(), frozenset(), T0, T0)
    items = [comment(n, b, t) for n, (b, t) in enumerate(raw, start=1)]
    opening = initial_context(
        thread, items, workspace, COUNTER, budget, author_trusted=author_trusted
    )
    rendered = opening.text
    assert COUNTER.count(rendered) <= budget
    assert fixed + COUNTER.count(rendered) + 16 <= prompt_budget  # the first request fits
    assert title in rendered
    first_line = body.splitlines()[0]
    assert first_line[:8] in rendered  # the body's first line, at least its beginning
    if items:
        newest = items[-1]
        assert f"- ({len(items)}) @user{len(items)}" in rendered
        assert newest.comment.body.splitlines()[0][:8] in rendered
    excluded = {
        int(c.source[9:-1])
        for c in opening.plan.choices
        if c.source.startswith("comment (") and c.grain is Grain.EXCLUDED
    }
    assert left_out_comments(rendered) == excluded  # every comment left out is named


def test_japanese_thread_in_a_4000_token_window_keeps_the_newest_comment(
    workspace: Workspace,
) -> None:
    """The review's reproduction: a long Japanese issue body used to take the whole budget."""
    body = "ログイン画面でエラーが発生します。再現手順は以下のとおりです。" * 120
    items = [comment(n, f"コメント{n}は再現しました。" * 20, True) for n in range(1, 11)]
    key = TaskKey(Platform.GITHUB, REPO, Kind.ISSUE, 1)
    thread = Thread(
        key, "ログインできない", body, "alice", "open", frozenset(), frozenset(), T0, T0
    )
    budget = opening_budget(4000 - 1024, system_and_tools(workspace))
    opening = initial_context(thread, items, workspace, COUNTER, budget, author_trusted=True)
    choices = {c.source: c for c in opening.plan.choices}
    assert choices["comment (10)"].grain is not Grain.EXCLUDED
    assert "コメント10は再現しました。" in opening.text
    assert "ログインできない" in opening.text and "ログイン画面でエラー" in opening.text
    assert COUNTER.count(opening.text) <= budget


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(thread_parts=threads(), share=st.floats(min_value=0.05, max_value=0.95))
def test_an_opening_cut_after_the_fact_keeps_both_ends(
    workspace: Workspace, thread_parts: tuple[str, str, list[tuple[str, bool]]], share: float
) -> None:
    """What `fit` does when the endpoint makes the request smaller than planned: the cut
    opening still holds the title, the body's beginning and the newest comment's header, and
    no quoted line is separated from its trust mark."""
    title, body, raw = thread_parts
    key = TaskKey(Platform.GITHUB, REPO, Kind.ISSUE, 1)
    thread = Thread(key, title, body, "alice", "open", frozenset(), frozenset(), T0, T0)
    items = [comment(n, b, t) for n, (b, t) in enumerate(raw, start=1)]
    full = initial_context(thread, items, workspace, COUNTER, 6000, author_trusted=False).text
    limit = max(256, int(COUNTER.count(full) * share))
    cut = truncate_text(full, limit, COUNTER)
    assert COUNTER.count(cut) <= limit
    assert title in cut and body.splitlines()[0][:8] in cut
    if items:
        assert f"- ({len(items)}) @user{len(items)} (" in cut
    blocks = cut.split("\n\n")
    # Every block of quoted text starts with its own header (a comment's, or the thread's).
    assert not any(b.lstrip().startswith(">") for b in blocks)
