"""The agent runs the repository's checks before it publishes: a failure goes back to the model,
and the pull/merge request body and the final comment say what passed (real jail, real daemon,
emulator and scripted model)."""

from __future__ import annotations

from typing import Any

from bot.model.state import Status
from bot_sandbox.llm_server import count_tool_results
from tests.conftest import REPO
from tests.rig import Rig

TEST = (
    "import unittest\nfrom app import greet\n\n"
    "class T(unittest.TestCase):\n"
    "    def test_greet(self):\n        self.assertEqual(greet(), 'hello')\n"
)
JAIL = """
jail:
  enabled: true
  timeout_seconds: 60
  repositories:
    acme/app: {checks: ["cd src && python3 -m unittest -q test_app"]}
"""


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [(name, arguments)]}


def seed(rig: Rig) -> None:
    rig.forge.world.push(
        rig.platform,
        REPO,
        "main",
        {"src/app.py": "def greet():\n    return 'hi'\n", "src/test_app.py": TEST},
        "tests",
    )


def checks_said(text: str) -> str:
    return text[text.index("Checks:") :] if "Checks:" in text else ""


def change_request_body(rig: Rig) -> str:
    repo = rig.forge.world.repo(rig.platform, REPO)
    (request,) = [t.change for t in repo.threads.values() if t.change is not None]
    assert request is not None
    return request.body


def test_a_broken_first_change_is_fixed_after_the_checks_fail(rig: Rig) -> None:
    seed(rig)
    rig.extra_config = JAIL
    seen_by_model: list[str] = []

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        seen_by_model.append(str(request["messages"][-1].get("content")))
        done = count_tool_results(request)
        checks_failed = any("checks failed" in str(m.get("content")) for m in request["messages"])
        if not checks_failed:
            steps = [
                call("edit_file", path="src/app.py", old="'hi'", new="'helo'"),  # a typo
                call(
                    "run_command", command="cd src && python3 -c 'import app; print(app.greet())'"
                ),
                call("finish", summary="greet() now says helo."),
            ]
            return steps[min(done, len(steps) - 1)]
        asked = [str(m.get("tool_calls")) for m in request["messages"] if m["role"] == "assistant"]
        if not any("\\'hello\\'" in a or "'hello'" in a for a in asked):  # not fixed yet
            return call("edit_file", path="src/app.py", old="'helo'", new="'hello'")
        return call("finish", summary="greet() now says hello.")

    rig.model.policy = policy
    thread = rig.issue(title="Say hello", body="greet() in src/app.py should return hello.")
    rig.run_once()

    assert rig.state(thread).status is Status.DONE
    assert any("AssertionError: 'helo' != 'hello'" in text for text in seen_by_model)
    tool_results = [m for r in rig.model.requests for m in r["messages"] if m["role"] == "tool"]
    assert any(
        "helo" in str(m["content"]) and "passed in" in str(m["content"]) for m in tool_results
    )
    body = change_request_body(rig)
    assert "`cd src && python3 -m unittest -q test_app`: passed" in checks_said(body)
    final = rig.bot_comments(thread)[-1]
    assert "`cd src && python3 -m unittest -q test_app`: passed" in checks_said(final)
    assert rig.state(thread).check_rounds == 1


def test_checks_that_cannot_pass_are_said_in_the_thread_and_the_request(rig: Rig) -> None:
    seed(rig)
    rig.extra_config = JAIL.replace(
        "timeout_seconds: 60", "timeout_seconds: 60\n  max_fix_turns: 2"
    )
    steps = [
        call("edit_file", path="src/app.py", old="'hi'", new="'bye'"),
        call("finish", summary="greet() now says bye."),
    ]
    rig.model.policy = lambda request: steps[min(count_tool_results(request), len(steps) - 1)]
    thread = rig.issue(title="Say bye", body="greet() should return bye.")
    rig.run_once()

    assert rig.state(thread).status is Status.DONE
    assert rig.state(thread).check_rounds == 2  # two more turns, then it opens the request
    for text in (change_request_body(rig), rig.bot_comments(thread)[-1]):
        said = checks_said(text)
        assert "failed (exit status 1)" in said and "AssertionError" in said


def test_without_the_jail_the_request_says_checks_were_not_run(rig: Rig) -> None:
    seed(rig)
    steps = [
        call("edit_file", path="src/app.py", old="'hi'", new="'hello'"),
        call("finish", summary="greet() now says hello."),
    ]
    rig.model.policy = lambda request: steps[min(count_tool_results(request), len(steps) - 1)]
    thread = rig.issue(title="Say hello", body="greet() should return hello.")
    rig.run_once()
    assert "Checks: not run" in change_request_body(rig)
    tools = {t["function"]["name"] for r in rig.model.requests for t in r.get("tools") or []}
    assert "run_command" not in tools and rig.state(thread).status is Status.DONE
