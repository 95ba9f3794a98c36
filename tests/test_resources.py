"""Bounded resources (issue 11, hole 5): regex time bound, snapshot cache, task index, prune."""

from __future__ import annotations

import json
from pathlib import Path

from bot.agent.repo_tools import repo_tools
from bot.agent.tools import Toolbox
from bot.agent.workspace import Workspace
from bot.context.tokens import TokenCounter
from bot.llm.base import ToolCall


def call(toolbox: Toolbox, name: str, **arguments: object) -> str:
    return toolbox.execute(ToolCall("c1", name, json.dumps(arguments))).content


# -- search_code: model-written regexes run with a time bound ---------------------------------


def test_catastrophic_pattern_answers_with_an_error(tmp_path: Path) -> None:
    root = tmp_path / "snap"
    root.mkdir()
    # Stdlib `re` spends seconds on this line and the time grows 1.6 times per extra "a".
    (root / "a.txt").write_text("ok line\n" + "a" * 35 + "!\n")
    toolbox = Toolbox(repo_tools(Workspace(root, {}), TokenCounter(), 2000))
    result = toolbox.execute(ToolCall("c1", "search_code", json.dumps({"pattern": "(a|aa)+$"})))
    assert not result.ok
    assert result.content.startswith("error:") and "took too long" in result.content
    assert "a.txt:2" in result.content  # says where it stopped
    # An ordinary pattern on the same file still works.
    assert call(toolbox, "search_code", pattern=r"ok \w+").startswith("1 matching lines in 1 files")
