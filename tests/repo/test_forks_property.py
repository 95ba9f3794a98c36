"""Outsiders stay outside, over generated situations (docs/architecture.md, invariant 13):
whatever the request (an issue, a branch here by a writer or by a reader, a fork by a reader or
a writer, maintainer edits on or off), whatever happens before and during publishing (the
contributor pushes, maintainer edits are turned on or off, a person pushes to the target
branch), no branch of the upstream repository ever gains a commit the bot did not write on top
of what the repository already had, and a fork's branch gets the bot's commit only on its
current head while edits are allowed.

Real PyGithub / python-gitlab against the emulator. `FORK_EXAMPLES` examples per forge
(default 15)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.core.config import AgentSettings
from bot.forge.github import GitHubForge
from bot.forge.gitlab import GitLabForge
from bot.model.state import TaskState
from bot.model.thread import Kind, Platform, TaskKey
from bot.repo.publish import PublishError, publish
from bot.repo.snapshot import snapshot
from bot.repo.workspace import Workspace
from bot_sandbox.forge_server import Fault, ForgeServer
from bot_sandbox.world import SRepo, SThread, World
from tests.conftest import BOT_TOKEN, LABELS, REPO, fast_policy, seed_world

EXAMPLES = int(os.environ.get("FORK_EXAMPLES", "15"))
FORK_FILES = {".github/workflows/ci.yml": "on: push\n", ".gitlab-ci.yml": "x: {script: y}\n"}
EVENTS = st.sampled_from(["contributor_pushes", "toggle_edits", "main_moves", "nothing"])


def reachable(repo: SRepo) -> set[str]:
    return set().union(*(repo.ancestors(sha) for sha in repo.branches.values()))


def make_request(world: World, platform: str, shape: str, edits: bool) -> SThread:
    kind = "pull" if platform == "github" else "mr"
    if shape == "issue":
        return world.add_thread(platform, REPO, title="Fix it")
    if shape.startswith("here"):
        author = "alice" if shape == "here_by_writer" else "bob"
        world.push(platform, REPO, "feature", {"src/x.py": "x = 1\n"}, "feature work")
        return world.add_thread(platform, REPO, kind=kind, title="Fix it", author=author)
    author = "alice" if shape == "fork_by_writer" else "bob"
    return world.add_fork_request(
        platform, REPO, author=author, files=FORK_FILES, maintainer_can_modify=edits
    )


def happen(world: World, platform: str, thread: SThread, event: str, writers: set[str]) -> None:
    """One event; a writer's own push to the target branch goes into `writers`."""
    if event == "contributor_pushes" and thread.head_repo:
        world.push(platform, thread.head_repo, thread.head_ref, {"c.txt": "c\n"}, "more")
    elif event == "toggle_edits":
        thread.maintainer_can_modify = not thread.maintainer_can_modify
    elif event == "main_moves":
        writers.add(world.push(platform, REPO, "main", {"m.txt": "m\n"}, "main moves"))


def key_of(platform: str, thread: SThread) -> TaskKey:
    kinds = {"issue": Kind.ISSUE, "pull": Kind.PULL, "mr": Kind.MERGE_REQUEST}
    return TaskKey(Platform(platform), REPO, kinds[thread.kind], thread.number)


def forge_for(server: ForgeServer, platform: str) -> Any:
    policy = fast_policy(platform)
    if platform == "github":
        return GitHubForge(
            server.url, BOT_TOKEN, watch_labels=LABELS, seconds_between_writes=0, policy=policy
        )
    return GitLabForge(server.url, BOT_TOKEN, watch_labels=LABELS, policy=policy)


@pytest.mark.parametrize("platform", ["github", "gitlab"])
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    shape=st.sampled_from(
        ["issue", "here_by_writer", "here_by_reader", "fork_by_reader", "fork_by_writer"]
    ),
    edits=st.booleans(),
    own_branches=st.booleans(),
    before=st.lists(EVENTS, max_size=3),
    during=st.lists(EVENTS, max_size=2),
)
def test_no_outside_commit_reaches_an_upstream_branch(
    platform: str,
    shape: str,
    edits: bool,
    own_branches: bool,
    before: list[str],
    during: list[str],
) -> None:
    with ForgeServer() as server, tempfile.TemporaryDirectory() as tmp:
        world = seed_world(server).world
        thread = make_request(world, platform, shape, edits)
        upstream = world.repo(platform, REPO)
        forge = forge_for(server, platform)
        key = key_of(platform, thread)
        pinned = thread.head_sha or upstream.branches["main"]
        target = "main" if not thread.head_ref or thread.head_repo else thread.head_ref
        writers: set[str] = set()
        for event in before:
            happen(world, platform, thread, event, writers)
        allowed = reachable(upstream)  # what the repository already has
        # Events land while the bot publishes: right after it reads the destination branch.
        for event in during:
            server.add_fault(
                Fault(
                    kind="hook",
                    method="GET",
                    path=r"(git/ref/heads|repository/branches)/",
                    action=lambda e=event: happen(world, platform, thread, e),
                )
            )
        changes: dict[str, str | None] = {"src/app.py": "print('bot')\n"}
        state = TaskState(key=str(key), base_sha=pinned, base_branch=target, changes=changes)
        workspace = Workspace(snapshot(forge, REPO, pinned, Path(tmp) / "cache"), changes)
        settings_ = AgentSettings(push_to_existing_branches=own_branches)
        try:
            published = publish(
                forge, forge.get_thread(key), state, workspace, settings_, lambda: None, "Done."
            )
        except PublishError:
            published = None  # refused (a conflict, a protected path): nothing published

        new = reachable(upstream) - allowed - writers
        for sha in new:
            commit = upstream.commits[sha]
            assert commit.author == "coding-bot", (shape, commit.message)
            assert all(p in allowed or p in new or p in writers for p in commit.parents)
        if published is not None and published.repo is not None:  # pushed to the fork
            fork = world.repo(platform, published.repo)
            head = fork.commits[fork.branches[thread.head_ref]]
            assert head.author == "coding-bot"
            assert shape.startswith("fork")
            assert world.may_push(fork, thread.head_ref, "coding-bot")
