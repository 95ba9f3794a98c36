"""Publishing never discards anyone's commit (docs/architecture.md, invariant 12), on both
forges, with the real clients against the emulator: pushes made while the bot works are merged
or stop the task with the conflicting files named; modes, symlinks and files left out of the
snapshot survive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.core.config import AgentSettings
from bot.forge.errors import BranchMoved
from bot.model.git import FileChange
from bot.model.state import TaskState
from bot.model.thread import TaskKey
from bot.repo.publish import publish
from bot.repo.snapshot import snapshot
from bot.repo.workspace import Workspace
from bot_sandbox.forge_server import Fault, ForgeServer
from bot_sandbox.llm_server import count_tool_results
from bot_sandbox.world import SRepo, SThread
from tests.conftest import REPO, ForgeFactory
from tests.rig import Rig

DONE, FAILED = "coding agent done", "coding agent failed"
APP = "import sys\n\n\ndef main():\n    print('hi')\n"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [(name, arguments)]}


def steps(*replies: dict[str, Any], before: dict[int, Any] | None = None) -> Any:
    """A scripted model; `before[n]` runs (e.g. a person pushes) when step n is asked for."""
    done: set[int] = set()

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        step = min(count_tool_results(request), len(replies) - 1)
        if before and step in before and step not in done:
            done.add(step)
            before[step]()
        return replies[step]

    return policy


def request_on(rig: Rig, branch: str = "feature") -> SThread:
    """A pull/merge request whose branch the bot may push to, with a longer src/app.py."""
    rig.extra_config = "agent: {push_to_existing_branches: true}"
    rig.forge.world.push(rig.platform, REPO, "main", {"src/app.py": APP}, "longer app")
    kind = "pull" if rig.platform == "github" else "mr"
    return rig.issue(kind=kind, title="Greet", body="say hello", head_ref=branch)


def repo_of(rig: Rig) -> SRepo:
    return rig.forge.world.repo(rig.platform, REPO)


def person_pushes(rig: Rig, content: str, branch: str = "feature") -> Any:
    return lambda: rig.forge.world.push(
        rig.platform, REPO, branch, {"src/app.py": content}, "a person's commit"
    )


EDIT = call("edit_file", path="src/app.py", old="print('hi')", new="print('hello')")


def tool_results(rig: Rig, thread: SThread) -> list[str]:
    return [str(e["content"]) for e in rig.conversation(thread) if e.get("role") == "tool"]


def test_a_push_made_while_the_bot_works_is_kept(rig: Rig) -> None:
    thread = request_on(rig)
    pushed = person_pushes(rig, "import os\n" + APP)
    rig.model.policy = steps(EDIT, call("finish", summary="Done."), before={0: pushed})
    rig.run_once()
    repo = repo_of(rig)
    files = repo.files("feature")
    assert thread.labels == [DONE], rig.bot_comments(thread)
    assert files is not None
    assert files["src/app.py"] == b"import os\n" + APP.replace("'hi'", "'hello'").encode()
    head = repo.commits[repo.branches["feature"]]
    person = repo.commits[head.parents[0]]
    assert person.message == "a person's commit"  # on top of it, not beside it


def test_overlapping_push_stops_the_task_naming_the_file(rig: Rig) -> None:
    thread = request_on(rig)
    theirs = APP.replace("'hi'", "'hey there'")
    rig.model.policy = steps(
        EDIT, call("finish", summary="Done."), before={0: person_pushes(rig, theirs)}
    )
    rig.run_once()
    repo = repo_of(rig)
    head = repo.commits[repo.branches["feature"]]
    assert head.message == "a person's commit"  # nothing published, not even partly
    files = repo.files("feature")
    assert files is not None and files["src/app.py"] == theirs.encode()
    assert thread.labels == [FAILED]
    last = rig.bot_comments(thread)[-1]
    assert "conflict" in last and "`src/app.py`" in last and "nothing was published" in last


def test_a_push_between_the_bots_read_and_write_is_merged_not_overwritten(rig: Rig) -> None:
    """The head moves after the bot read it: GitHub refuses the non-forced ref update (422),
    GitLab the commit whose file changed since `last_commit_id` (400); the bot reads again."""
    thread = request_on(rig)
    write = "/git/trees" if rig.platform == "github" else "/repository/commits"
    rig.forge.add_fault(
        Fault(
            kind="hook",
            platform=rig.platform,
            method="POST",
            path=write,
            action=person_pushes(rig, "import os\n" + APP),
        )
    )
    rig.model.policy = steps(EDIT, call("finish", summary="Done."))
    rig.run_once()
    files = repo_of(rig).files("feature")
    assert thread.labels == [DONE], rig.bot_comments(thread)
    assert files is not None
    assert files["src/app.py"] == b"import os\n" + APP.replace("'hi'", "'hello'").encode()
    refused = 422 if rig.platform == "github" else 400
    assert any(r.status == refused for r in rig.forge.requests if r.method in ("PATCH", "POST"))


def test_an_executable_script_stays_executable(rig: Rig) -> None:
    script = "#!/bin/sh\necho hi\n"
    world = rig.forge.world
    world.push(rig.platform, REPO, "main", {"run.sh": script}, "script", {"run.sh": "100755"})
    thread = rig.issue(title="Greet", body="say hello in run.sh")
    rig.model.policy = steps(
        call("edit_file", path="run.sh", old="echo hi", new="echo hello"),
        call("finish", summary="Done."),
    )
    rig.run_once()
    branch = f"bot/{thread.number}-greet"
    assert thread.labels == [DONE], rig.bot_comments(thread)
    files, modes = repo_of(rig).files(branch), repo_of(rig).modes(branch)
    assert files is not None and modes is not None
    assert files["run.sh"] == b"#!/bin/sh\necho hello\n" and modes["run.sh"] == "100755"


def test_a_symlink_stays_a_symlink(rig: Rig) -> None:
    world = rig.forge.world
    world.push(
        rig.platform,
        REPO,
        "main",
        {"docs/v2.md": "# v2\n", "docs/latest.md": "v2.md"},
        "docs",
        {"docs/latest.md": "120000"},
    )
    thread = rig.issue(title="Docs", body="update the latest docs")
    rig.model.policy = steps(
        call("read_file", path="docs/latest.md"),
        call("write_file", path="docs/latest.md", content="# v3\n"),
        call("edit_file", path="docs/v2.md", old="# v2", new="# v2, updated"),
        call("finish", summary="Done."),
    )
    rig.run_once()
    assert thread.labels == [DONE], rig.bot_comments(thread)
    results = tool_results(rig, thread)
    assert "link to v2.md" in results[0]
    assert "symbolic link to 'v2.md'" in results[1]  # refused, with the way out
    branch = f"bot/{thread.number}-docs"
    files, modes = repo_of(rig).files(branch), repo_of(rig).modes(branch)
    assert files is not None and modes is not None
    assert files["docs/latest.md"] == b"v2.md" and modes["docs/latest.md"] == "120000"
    assert files["docs/v2.md"] == b"# v2, updated\n"


def test_a_file_left_out_of_the_snapshot_is_never_created_or_overwritten(rig: Rig) -> None:
    rig.extra_config = "agent: {snapshot_max_bytes: 1048576}"
    big = b"x" * (1536 * 1024)  # over the snapshot's total: left out, but it exists
    rig.forge.world.push(rig.platform, REPO, "main", {"vendor/big.bin": big}, "vendor")
    thread = rig.issue(title="Greet", body="say hello")
    rig.model.policy = steps(
        call("list_files", path="vendor"),
        call("write_file", path="vendor/big.bin", content="small now\n"),
        call("edit_file", path="vendor/big.bin", old="x", new="y"),
        call("edit_file", path="src/app.py", old="'hi'", new="'hello'"),
        call("finish", summary="Done."),
    )
    rig.run_once()
    assert thread.labels == [DONE], rig.bot_comments(thread)
    results = tool_results(rig, thread)
    assert "1 more files exist but are left out of the snapshot" in results[0]
    assert "vendor/big.bin" in results[0]
    for result in results[1:3]:
        assert "vendor/big.bin exists in the repository but was left out" in result
    files = repo_of(rig).files(f"bot/{thread.number}-greet")
    assert files is not None
    assert files["vendor/big.bin"] == big and files["src/app.py"] == b"print('hello')\n"
    commits = [r for r in rig.forge.requests if r.method == "POST" and "commits" in r.path]
    assert all(r.status < 400 for r in commits)  # GitLab never got a "create" it refused


def test_forges_refuse_a_commit_on_a_head_that_moved(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    """The adapters' writes are conditional: GitHub's non-forced ref update answers 422 "Update
    is not a fast forward", GitLab checks `last_commit_id`; both surface as BranchMoved."""
    world = server.world
    pinned = world.push(platform, REPO, "work", {"src/app.py": APP}, "start")
    world.push(platform, REPO, "work", {"src/app.py": "import os\n" + APP}, "a person's commit")
    forge = make_forge()
    change = FileChange("src/app.py", APP.replace("'hi'", "'hello'"), True)
    with pytest.raises(BranchMoved):
        forge.commit_files(REPO, "work", pinned, "bot commit", [change])
    files = world.repo(platform, REPO).files("work")
    assert files is not None and files["src/app.py"] == b"import os\n" + APP.encode()


def test_a_chmod_pushed_while_the_bot_works_is_kept(rig: Rig) -> None:
    thread = request_on(rig)
    chmod = lambda: rig.forge.world.push(  # noqa: E731 - a person's chmod +x, content unchanged
        rig.platform, REPO, "feature", {}, "make it runnable", {"src/app.py": "100755"}
    )
    rig.model.policy = steps(EDIT, call("finish", summary="Done."), before={0: chmod})
    rig.run_once()
    assert thread.labels == [DONE], rig.bot_comments(thread)
    files, modes = repo_of(rig).files("feature"), repo_of(rig).modes("feature")
    assert files is not None and modes is not None
    assert files["src/app.py"] == APP.replace("'hi'", "'hello'").encode()
    assert modes["src/app.py"] == "100755"


def test_deletes_are_committed_and_listed_only_when_the_file_existed(
    server: ForgeServer, platform: str, make_forge: ForgeFactory, tmp_path: Path
) -> None:
    """A delete reaches the commit (never dropped while the request lists it); deleting a file
    that never existed is neither committed nor listed."""
    world = server.world
    thread = world.add_thread(platform, REPO, title="Tidy", labels=["coding agent"])
    forge = make_forge()
    key = TaskKey.parse(f"{platform}:{REPO}#{thread.number}")
    pinned = world.repo(platform, REPO).branches["main"]
    changes: dict[str, str | None] = {"README.md": None, "ghost.txt": None, "new.txt": "new\n"}
    state = TaskState(key=str(key), base_sha=pinned, changes=changes)
    workspace = Workspace(snapshot(forge, REPO, pinned, tmp_path / "cache"), changes)
    published = publish(
        forge, forge.get_thread(key), state, workspace, AgentSettings(), lambda: None, "Tidied."
    )
    assert published is not None
    files = world.repo(platform, REPO).files(published.branch)
    assert files is not None and "README.md" not in files and files["new.txt"] == b"new\n"
    body = next(t for t in world.repo(platform, REPO).threads.values() if t.change).body
    assert "- `README.md` (deleted)" in body and "- `new.txt`" in body and "ghost" not in body
