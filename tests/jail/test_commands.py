"""`run_command` and the repository's checks, over the real jail and a real workspace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.agent.commands import CommandSession, checks_markdown, failing, run_command_tool
from bot.agent.repo_checks import checks_for
from bot.context.tokens import TokenCounter, encoding_for
from bot.core.config import JailSettings, RepoChecks
from bot.jail import Jail
from bot.llm.base import ToolCall
from bot.repo.workspace import Workspace
from tests.jail.test_jail import small_limits

COUNTER = TokenCounter(encoding_for("gpt-4o", None))
TEST = (
    "import unittest\nfrom app import greet\n\n"
    "class T(unittest.TestCase):\n"
    "    def test_greet(self):\n        self.assertEqual(greet(), 'hello')\n"
)


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "snapshot"
    (root / "src").mkdir(parents=True)
    (root / "src/app.py").write_text("def greet():\n    return 'hi'\n")
    (root / "src/test_app.py").write_text(TEST)
    (root / ".snapshot-complete").write_text("x")
    return Workspace(root, {})


@pytest.fixture
def session(workspace: Workspace) -> Iterator[CommandSession]:
    checks = RepoChecks(
        setup=["mkdir -p .venv && echo installed > .venv/marker"],
        checks=["cd src && python3 -m unittest -q test_app"],
    )
    s = CommandSession(Jail(limits=small_limits()), workspace, checks, head_trusted=True)
    yield s
    s.close()


CALL = ToolCall("c1", "run_command", "{}")


def test_a_failing_check_then_a_fix_then_passing(
    session: CommandSession, workspace: Workspace
) -> None:
    first = session.run_checks()
    assert [r.ok for r in first] == [False]
    assert "AssertionError: 'hi' != 'hello'" in first[0].last_lines
    workspace.write("src/app.py", "def greet():\n    return 'hello'\n")  # the model's fix
    second = session.run_checks()
    assert failing(second) == []
    body = checks_markdown(second, enabled=True)
    assert "`cd src && python3 -m unittest -q test_app`: passed" in body
    assert "OK" in body  # the last lines of its output


def test_setup_runs_once_and_what_it_installs_is_not_a_change(
    session: CommandSession, workspace: Workspace
) -> None:
    session.run_checks()
    session.run_checks()
    assert [r.ok for r in session.setup_results] == [True]
    assert workspace.changes == {}


def test_files_a_command_changes_become_changes_and_the_model_sees_the_diff(
    session: CommandSession, workspace: Workspace
) -> None:
    tool = run_command_tool(session, COUNTER, 2000)
    result = tool.run(tool.args(command="sed -i s/hi/hello/ src/app.py && echo done"), CALL)
    assert result.ok
    assert workspace.changes == {"src/app.py": "def greet():\n    return 'hello'\n"}
    assert "-    return 'hi'\n+    return 'hello'" in result.content
    assert "passed in" in result.content and "done" in result.content


def test_a_command_cannot_change_protected_paths(
    session: CommandSession, workspace: Workspace
) -> None:
    tool = run_command_tool(session, COUNTER, 2000)
    result = tool.run(
        tool.args(command="mkdir -p .github/workflows && echo x > .github/workflows/ci.yml"),
        CALL,
    )
    assert workspace.changes == {}
    assert "not taken into your changes" in result.content
    assert ".github/workflows/ci.yml" in result.content


def test_a_failing_command_is_reported_as_a_result(session: CommandSession) -> None:
    tool = run_command_tool(session, COUNTER, 2000)
    result = tool.run(tool.args(command="echo oops >&2; exit 3"), CALL)
    assert not result.ok
    assert "failed (exit status 3)" in result.content and "oops" in result.content


def test_checks_markdown_says_when_checks_were_not_run() -> None:
    assert "not run" in checks_markdown(None, enabled=False)
    assert "none configured" in checks_markdown([], enabled=True)


def test_configuration_wins_over_the_repository_file() -> None:
    configured = JailSettings(repositories={"Acme/App": RepoChecks(checks=("make test",))})
    read = {".coding-agent.yml": "checks: [evil]\n"}.get
    assert checks_for(configured, "acme/app", read).checks == ("make test",)
    assert checks_for(JailSettings(), "acme/app", read).checks == ("evil",)
    assert checks_for(JailSettings(), "acme/app", {}.get) == RepoChecks()


def test_an_invalid_repository_file_is_ignored() -> None:
    for text in ("checks: 3\n", "- a\n- b\n", "checks: [a\n", "chekcs: [a]\n"):
        assert checks_for(JailSettings(), "a/b", {".coding-agent.yml": text}.get) == RepoChecks()


def test_a_repository_file_cannot_open_the_network_alone() -> None:
    read = {".coding-agent.yml": "setup: [pip install .]\nsetup_network: true\n"}.get
    assert checks_for(JailSettings(), "a/b", read).setup_network is False
    allowed = JailSettings(allow_repo_setup_network=True)
    assert checks_for(allowed, "a/b", read).setup_network is True
