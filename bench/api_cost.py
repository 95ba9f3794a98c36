"""API cost of polling: requests per idle discovery cycle and per unchanged comment check.

Run: .venv/bin/python bench/api_cost.py [--repos 20] [--issues 50] [--comments 1000]
         [--scale 10,100,1000]

`--scale`: requests per idle discovery cycle (mentions included) at each number of repositories,
on both forges, listing repository by repository (as before) and across them (search on GitHub,
group listings on GitLab).

The baseline is the seed design: every cycle lists every open issue of every repository
without conditional requests, and every comment check fetches the whole comment list.
"""

from __future__ import annotations

import argparse
import tempfile
from datetime import timedelta
from pathlib import Path

import requests

from bot.core import log
from bot.core.config import LabelSettings
from bot.forge.factory import Source, watched_labels
from bot.forge.github import GitHubForge
from bot.forge.gitlab import GitLabForge
from bot.model.thread import Kind, Platform, TaskKey
from bot.service.discovery import discover
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.world import StepClock, utcnow

TOKEN = "bench-token"
LABELS = watched_labels(LabelSettings())  # exactly what the daemon watches


def seed(server: ForgeServer, repos: int, issues: int, comments: int) -> list[str]:
    world = server.world
    world.clock = StepClock()  # type: ignore[method-assign]
    world.add_user("bot", token=TOKEN)
    names = [f"org/repo{i}" for i in range(repos)]
    for name in names:
        world.add_repo("github", name, roles={"alice": "write"})
        for j in range(issues):
            world.add_thread(
                "github", name, title=f"issue {j}", labels=["coding agent"] if j % 5 == 0 else []
            )
    thread = world.add_thread("github", names[0], title="long thread")
    for k in range(comments):
        world.add_comment("github", names[0], thread.number, f"comment {k}", author="alice")
    return names


def baseline_cycle(server: ForgeServer, names: list[str]) -> None:
    for name in names:
        requests.get(
            f"{server.url}/repos/{name}/issues",
            params={"state": "open", "per_page": 100},
            headers={"Authorization": f"token {TOKEN}"},
            timeout=10,
        )


def baseline_comment_check(server: ForgeServer, repo: str, number: int) -> None:
    url: str | None = f"{server.url}/repos/{repo}/issues/{number}/comments?per_page=100"
    while url:
        response = requests.get(url, headers={"Authorization": f"token {TOKEN}"}, timeout=10)
        url = response.links.get("next", {}).get("url")


def measure(server: ForgeServer, action: object) -> tuple[int, int]:
    server.clear_log()
    action()  # type: ignore[operator]
    total = server.count()
    return total, total - server.count(status=304)


def full_task(naive: bool) -> tuple[int, int]:
    """Requests for one task: 4 model steps, 150 comments already on the thread."""
    from bench._harness import REPO as BENCH_REPO
    from bench._harness import TOKEN as BENCH_TOKEN
    from bench._harness import daemon, seed, settings
    from bench.naive import NaiveGitHubForge
    from bot.forge.factory import Source
    from bot_sandbox.llm_server import LLMServer, stepping_policy

    with (
        ForgeServer() as server,
        LLMServer(stepping_policy(steps=3)) as model,
        tempfile.TemporaryDirectory() as tmp,
    ):
        seed(server)
        server.world.clock = StepClock()  # type: ignore[method-assign]
        thread = server.world.add_thread(
            "github", BENCH_REPO, title="task", labels=["coding agent"]
        )
        for n in range(150):
            server.world.add_comment(
                "github", BENCH_REPO, thread.number, f"comment {n}", author="alice"
            )
        cfg = settings(server, model, Path(tmp))
        sources = None
        if naive:
            naive_forge = NaiveGitHubForge(
                server.url, BENCH_TOKEN, watch_labels=LABELS, seconds_between_writes=0
            )
            sources = [Source(naive_forge, (BENCH_REPO,))]
        d = daemon(cfg, sources)
        server.clear_log()
        try:
            d.run_once()
        finally:
            d.close()
        total = server.count()
        return total, total - server.count(status=304)


def scale_cycle(platform: str, repos: int) -> tuple[int, int, int, int]:
    """(requests, billed) of one idle cycle listing per repository, then across repositories."""
    with ForgeServer() as server:
        world = server.world
        # Idle: nothing changed in the last hour (GitLab's change listings overlap 5 minutes).
        world.clock = StepClock(utcnow() - timedelta(hours=1), step=0.001)  # type: ignore[method-assign]
        world.add_user("bot", token=TOKEN)
        names = [f"org/repo{i}" for i in range(repos)]
        for i, name in enumerate(names):
            world.add_repo(platform, name, roles={"alice": "write"})
            world.add_thread(platform, name, title="idle", labels=["bug"])
            if i % 10 == 0:
                world.add_thread(platform, name, title="task", labels=["coding agent"])
        forge = (
            GitHubForge(server.url, TOKEN, watch_labels=LABELS, seconds_between_writes=0)
            if platform == "github"
            else GitLabForge(server.url, TOKEN, watch_labels=LABELS)
        )
        forge.whoami()
        out: list[int] = []
        for cross_from in (len(names) + 1, 1):  # per repository, then across
            source = Source(forge, tuple(names), cross_repo_from=cross_from)
            for _ in range(2):  # fill the caches (ETags, high-water marks, changes read)
                discover(source)
            out.extend(measure(server, lambda source=source: discover(source)))
        return out[0], out[1], out[2], out[3]


def print_scale(sizes: list[int]) -> None:
    print(f"{'idle cycle':<30} {'per-repo req':>13} {'billed':>7} {'across req':>11} {'billed':>7}")
    for platform in ("github", "gitlab"):
        for size in sizes:
            per_req, per_billed, across_req, across_billed = scale_cycle(platform, size)
            name = f"{platform}, {size} repositories"
            print(f"{name:<30} {per_req:>13} {per_billed:>7} {across_req:>11} {across_billed:>7}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repos", type=int, default=20)
    parser.add_argument("--issues", type=int, default=50)
    parser.add_argument("--comments", type=int, default=1000)
    parser.add_argument("--scale", default="10,100,1000", help="repository counts, or ''")
    args = parser.parse_args()
    log.configure("error")
    if args.scale:
        print_scale([int(n) for n in args.scale.split(",")])
    with ForgeServer() as server:
        names = seed(server, args.repos, args.issues, args.comments)
        forge = GitHubForge(server.url, TOKEN, watch_labels=LABELS, seconds_between_writes=0)
        forge.whoami()
        for name in names:
            forge.list_tasks(name)  # first cycle fills the ETag cache
        thread_number = args.issues + 1
        key = TaskKey(Platform.GITHUB, names[0], Kind.ISSUE, thread_number)
        newest = forge.list_comments(key)[-1].updated_at
        forge.list_comments(key, since=newest)

        ours_cycle = measure(server, lambda: [forge.list_tasks(n) for n in names])
        base_cycle = measure(server, lambda: baseline_cycle(server, names))
        ours_check = measure(server, lambda: forge.list_comments(key, since=newest))
        base_check = measure(
            server, lambda: baseline_comment_check(server, names[0], thread_number)
        )

    ours_task, base_task = full_task(naive=False), full_task(naive=True)
    rows = [
        (f"idle poll cycle ({args.repos} repos x {args.issues} issues)", ours_cycle, base_cycle),
        (f"unchanged comment check ({args.comments} comments)", ours_check, base_check),
        ("full task (4 model calls, 150 comments)", ours_task, base_task),
    ]
    print(
        f"{'measure':<52} {'ours req':>9} {'ours billed':>12} {'base req':>9} {'base billed':>12}"
    )
    for name, ours, base in rows:
        print(f"{name:<52} {ours[0]:>9} {ours[1]:>12} {base[0]:>9} {base[1]:>12}")
    print("billed = requests that count against the rate limit (everything but 304)")


if __name__ == "__main__":
    main()
