"""Context engine benchmark on generated data, against a naive baseline measured in the same run.

Data: a 1,000-comment thread (half Japanese), a 50,000-file tree, 200 candidate source files.
Baseline: the usual shortcut, budget by chars/4 and cut the text at the end.

Run: .venv/bin/python -m bench.context_bench [--budget 6000] [--files 50000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.context.engine import initial_context
from bot.context.tokens import Estimator, TokenCounter
from bot.context.trees import cached_trees, snapshot_trees
from bot.model.thread import Comment, Kind, Permission, Platform, TaskKey, Thread
from bot.model.trust import NewComment
from bot.repo.snapshot import write_index
from bot.repo.workspace import Workspace

EN = "The login page fails when the password contains a space; please check the handler."
JA = "パスワードに空白が含まれているとログイン画面でエラーになります。処理を確認してください。"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def make_repo(root: Path, files: int, candidates: int) -> None:
    rng = random.Random(7)
    for i in range(files):
        directory = root / f"pkg{i % 100}" / f"mod{i % 7}"
        directory.mkdir(parents=True, exist_ok=True)
        body = (
            f"def handler_{i}(request):\n    return check_password(request)\n"
            if i < candidates
            else "x = 1\n"
        )
        (directory / f"file{i}.py").write_text(body + "# " + "word " * rng.randint(5, 50) + "\n")
    (root / "README.md").write_text("# Service\n\n## Login\n\nDetails.\n" * 30)


def make_thread(n: int) -> tuple[Thread, list[NewComment]]:
    key = TaskKey(Platform.GITHUB, "acme/app", Kind.ISSUE, 1)
    thread = Thread(
        key,
        "Login fails",
        f"{EN}\n{JA}\nSee check_password in pkg1/mod1/file1.py.",
        "alice",
        "open",
        frozenset(),
        frozenset(),
        T0,
        T0,
    )
    comments = []
    for i in range(n):
        at = T0 + timedelta(minutes=i)
        text = (JA if i % 2 else EN) * (1 + i % 4)
        comments.append(
            NewComment(
                Comment(f"c{i}", f"user{i % 9}", text, at, at, Permission.WRITE), False, True
            )
        )
    return thread, comments


def naive(thread: Thread, comments: list[NewComment], budget: int) -> str:
    text = f"{thread.title}\n{thread.body}\n" + "\n".join(
        f"@{c.comment.author}: {c.comment.body}" for c in comments
    )
    return text[: budget * 4]  # chars/4 "tokens", cut at the end


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=6000)
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5, help="timed builds (medians shown)")
    args = parser.parse_args()
    counter = TokenCounter("cl100k_base")
    estimator = Estimator("cl100k_base")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        make_repo(root, args.files, 200)
        setup = time.perf_counter() - started
        thread, comments = make_thread(1000)
        started = time.perf_counter()
        opening = initial_context(thread, comments, Workspace(root, {}), counter, args.budget)
        unindexed = time.perf_counter() - started  # a snapshot cached before the index: a walk
        entries = write_index(root)  # what extraction does once per snapshot: the file index
        cached_trees(root, lambda: snapshot_trees([path for path, _ in entries]))  # and trees
        timings, fresh = [], []
        for _ in range(args.repeat):
            started = time.perf_counter()
            opening = initial_context(thread, comments, Workspace(root, {}), counter, args.budget)
            timings.append(time.perf_counter() - started)
            # A thread seen for the first time: none of its texts counted yet (the tokenizer
            # itself is loaded once per process, so a new counter does not load it again).
            new_counter = TokenCounter("cl100k_base")
            started = time.perf_counter()
            initial_context(thread, comments, Workspace(root, {}), new_counter, args.budget)
            fresh.append(time.perf_counter() - started)
        ours_time = sorted(timings)[len(timings) // 2]
        fresh_time = sorted(fresh)[len(fresh) // 2]
        started = time.perf_counter()
        baseline = naive(thread, comments, args.budget)
        base_time = time.perf_counter() - started

    ours_tokens, base_tokens = counter.count(opening.text), counter.count(baseline)
    newest = comments[-1].comment.body[:30]
    data = f"{args.files} files, 200 candidates, 1000 comments (half Japanese)"
    print(f"generated: {data} in {setup:.1f}s")
    print(f"\n{'':34}{'ours':>12}{'naive':>12}")
    print(f"{'plan+render time (s)':34}{ours_time:>12.3f}{base_time:>12.4f}")
    print(f"{'  first build for a new thread (s)':34}{fresh_time:>12.3f}")
    print(f"{'  same, snapshot without index (s)':34}{unindexed:>12.2f}")
    print(f"{'  index speed-up':34}{unindexed / ours_time:>11.1f}x")
    print(f"{'final size (exact tokens)':34}{ours_tokens:>12}{base_tokens:>12}")
    print(f"{'budget':34}{args.budget:>12}{args.budget:>12}")
    print(
        f"{'size / budget':34}{ours_tokens / args.budget:>12.2f}{base_tokens / args.budget:>12.2f}"
    )
    fits = (str(ours_tokens <= args.budget), str(base_tokens <= args.budget))
    print(f"{'fits the budget':34}{fits[0]:>12}{fits[1]:>12}")
    print(f"{'newest comment present':34}{newest in opening.text!s:>12}{newest in baseline!s:>12}")
    print(f"{'says what it left out':34}{'Left out' in opening.text!s:>12}{'False':>12}")
    print("\nestimator error against exact counts (cl100k_base):")
    print(f"{'language':12}{'exact':>8}{'ours':>8}{'err':>8}{'chars/4':>9}{'err':>8}")
    for name, text in (
        ("English", EN * 40),
        ("Japanese", JA * 40),
        ("Python", Path(__file__).read_text()),
    ):
        exact = counter.count(text)
        ours, quarter = estimator.estimate(text), len(text) / 4
        errors = f"{(ours - exact) / exact:>+8.0%}{quarter:>9.0f}{(quarter - exact) / exact:>+8.0%}"
        print(f"{name:12}{exact:>8}{ours:>8}{errors}")


if __name__ == "__main__":
    main()
