"""CI definitions and other protected paths: the tools refuse them unless the repository's
configuration allows them, and publishing never carries one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.agent.repo_tools import repo_tools
from bot.agent.tools import Toolbox, ToolResult
from bot.context.tokens import TokenCounter
from bot.core.config import AgentSettings, ConfigError, parse_settings
from bot.llm.base import ToolCall
from bot.model.state import TaskState
from bot.model.thread import Kind, Platform, TaskKey
from bot.repo.protected import PathGuard
from bot.repo.publish import publish
from bot.repo.workspace import Workspace
from bot_sandbox.forge_server import ForgeServer
from tests.conftest import REPO, ForgeFactory
from tests.rig import Rig
from tests.test_agent_e2e import call, scripted

REFUSED = [
    ".github/workflows/ci.yml",
    ".github/workflows/nested/deep.yaml",
    "./.github//workflows/x.yml",
    ".GitHub/Workflows/Release.yml",
    ".github/actions/setup/action.yml",
    ".gitlab-ci.yml",
    ".gitlab/ci/jobs.yml",
]
ALLOWED = ["src/app.py", ".github/ISSUE_TEMPLATE/bug.md", "ci/workflows/x.yml", ".gitlab-ci.yml.md"]


def toolbox(root: Path, guard: PathGuard, changes: dict[str, str | None]) -> Toolbox:
    return Toolbox(repo_tools(Workspace(root, changes, guard), TokenCounter(), 500, trusted=True))


def run(box: Toolbox, name: str, **arguments: object) -> ToolResult:
    return box.execute(ToolCall("c1", name, json.dumps(arguments)))


@pytest.fixture
def snap(tmp_path: Path) -> Path:
    root = tmp_path / "snap"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    (root / ".gitlab-ci.yml").write_text("test:\n  script: make\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


@pytest.mark.parametrize("path", REFUSED)
def test_write_to_a_protected_path_is_refused_with_a_readable_error(snap: Path, path: str) -> None:
    changes: dict[str, str | None] = {}
    box = toolbox(snap, PathGuard.for_repo(AgentSettings(), REPO), changes)
    result = run(box, "write_file", path=path, content="on: push\njobs: {}\n")
    assert not result.ok and "is protected" in result.content
    assert "agent.protected_paths" in result.content and "describe the change" in result.content
    assert changes == {}


def test_edit_of_an_existing_ci_file_is_refused(snap: Path) -> None:
    changes: dict[str, str | None] = {}
    box = toolbox(snap, PathGuard.for_repo(AgentSettings(), REPO), changes)
    for path in (".gitlab-ci.yml", ".github/workflows/ci.yml"):
        result = run(
            box, "edit_file", path=path, old="make" if "gitlab" in path else "push", new="x"
        )
        assert not result.ok and f"{path} is protected" in result.content
    assert changes == {}
    assert run(box, "read_file", path=".gitlab-ci.yml").ok  # reading stays allowed


@pytest.mark.parametrize("path", ALLOWED)
def test_other_paths_are_written(snap: Path, path: str) -> None:
    changes: dict[str, str | None] = {}
    box = toolbox(snap, PathGuard.for_repo(AgentSettings(), REPO), changes)
    assert run(box, "write_file", path=path, content="x\n").ok
    assert list(changes) == [path]


def test_a_workspace_without_a_guard_still_protects_ci(snap: Path) -> None:
    changes: dict[str, str | None] = {}
    box = Toolbox(repo_tools(Workspace(snap, changes), TokenCounter(), 500, trusted=True))
    assert not run(box, "write_file", path=".gitlab-ci.yml", content="x").ok


def settings_text(extra: str) -> str:
    return f"""
github: {{token: t, repositories: [{REPO}, acme/other]}}
agent:
{extra}
"""


def test_allowed_per_repository_by_configuration(snap: Path) -> None:
    agent = parse_settings(
        settings_text('  allow_protected_paths: {"ACME/app": [".github/workflows/**"]}'), {}
    ).agent
    changes: dict[str, str | None] = {}
    box = toolbox(snap, PathGuard.for_repo(agent, REPO), changes)
    assert run(box, "write_file", path=".github/workflows/new.yml", content="on: push\n").ok
    assert not run(box, "write_file", path=".gitlab-ci.yml", content="x").ok  # not allowed there
    other = toolbox(snap, PathGuard.for_repo(agent, "acme/other"), {})
    assert not run(other, "write_file", path=".github/workflows/new.yml", content="x").ok


def test_protected_paths_are_configurable(snap: Path) -> None:
    agent = parse_settings(settings_text('  protected_paths: ["deploy/**", "*.tf"]'), {}).agent
    box = toolbox(snap, PathGuard.for_repo(agent, REPO), {})
    assert not run(box, "write_file", path="deploy/prod.sh", content="x").ok
    assert not run(box, "write_file", path="main.tf", content="x").ok
    assert run(box, "write_file", path=".gitlab-ci.yml", content="x").ok  # replaced the defaults


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            '  allow_protected_paths: {"acme/typo": ["**"]}',
            "'acme/typo' is not a configured repository",
        ),
        ('  allow_protected_paths: {"not a repo": ["**"]}', "'not a repo' is not of the form"),
        ('  protected_paths: ["/"]', "agent.protected_paths: a protected path pattern is empty"),
    ],
)
def test_bad_protection_config_is_named(extra: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_settings(settings_text(extra), {})


def test_publishing_never_carries_a_protected_file(
    server: ForgeServer, make_forge: ForgeFactory, platform: str, snap: Path
) -> None:
    """Defence in depth: a changeset that holds one anyway (e.g. from before the
    configuration was tightened) publishes without it."""
    forge = make_forge()
    kind = Kind.ISSUE
    thread = server.world.add_thread(platform, REPO, title="Fix it")
    key = TaskKey(Platform(platform), REPO, kind, thread.number)
    repo = server.world.repo(platform, REPO)
    state = TaskState(key=str(key), base_sha=repo.branches["main"])
    state.changes = {".github/workflows/evil.yml": "on: push\n", "src/app.py": "print('ok')\n"}
    published = publish(
        forge,
        forge.get_thread(key),
        state,
        Workspace(snap, state.changes),
        AgentSettings(),
        lambda: None,
        "Done.",
    )
    assert published is not None
    files = repo.files(published.branch)
    assert files is not None and files["src/app.py"] == b"print('ok')\n"
    assert ".github/workflows/evil.yml" not in files
    opened = [t for t in repo.threads.values() if t.change is not None]
    assert len(opened) == 1 and "evil.yml" not in opened[0].change.body  # type: ignore[union-attr]


def test_the_model_is_told_and_nothing_protected_is_published(rig: Rig) -> None:
    thread = rig.issue(title="Add CI", body="Please add a workflow and fix the greeting.")
    rig.model.policy = scripted(
        call("write_file", path=".github/workflows/ci.yml", content="on: push\n"),
        call("edit_file", path="src/app.py", old="'hi'", new="'hello'"),
        call("finish", summary="Fixed the greeting; the workflow needs a person."),
    )
    rig.run_once()
    tool_results = [e["content"] for e in rig.conversation(thread) if e.get("role") == "tool"]
    assert ".github/workflows/ci.yml is protected" in tool_results[0]
    repo = rig.forge.world.repo(rig.platform, REPO)
    branch = f"bot/{thread.number}-add-ci"
    files = repo.files(branch)
    assert files is not None and files["src/app.py"] == b"print('hello')\n"
    assert not any(path.startswith(".github/") for path in files)


def test_an_allowed_repository_gets_its_workflow(rig: Rig) -> None:
    rig.extra_config = f'agent: {{allow_protected_paths: {{"{REPO}": [".github/workflows/**"]}}}}'
    thread = rig.issue(title="Add CI", body="Please add a workflow.")
    rig.model.policy = scripted(
        call("write_file", path=".github/workflows/ci.yml", content="on: push\n"),
        call("finish", summary="Added the workflow."),
    )
    rig.run_once()
    files = rig.forge.world.repo(rig.platform, REPO).files(f"bot/{thread.number}-add-ci")
    assert files is not None and files[".github/workflows/ci.yml"] == b"on: push\n"
