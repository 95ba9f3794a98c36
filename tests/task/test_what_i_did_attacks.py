"""Attacks on the final comment's account (bot/task/report.py, bot/task/finishing.py): inputs
an outsider or a steered model controls, and what a thread's readers would see. Real clients
against the emulator; what is checked is the Markdown as posted."""

from __future__ import annotations

import re

import pytest

from bot.forge.limits import comment_chars
from bot.model.state import Status
from bot.model.thread import Platform
from tests.conftest import REPO
from tests.rig import Rig
from tests.task.test_what_i_did import details
from tests.test_agent_e2e import call, scripted

MENTION = "@victim"
# A name that is mentions from end to end: cut anywhere, what is left of it pings someone.
NAME = ("docs/" + f" {MENTION}" * 20)[:110]


def _outside_code(line: str) -> str:
    """What of one line is not in a complete code span (CommonMark: a backtick run opens one
    that the next run of the same length closes; an unclosed run is literal text)."""
    out, i = [], 0
    while i < len(line):
        run = re.match(r"`+", line[i:])
        if run is None:
            out.append(line[i])
            i += 1
            continue
        fence = run.group()
        close = re.compile(f"(?<!`){fence}(?!`)").search(line, i + len(fence))
        if close is None:
            out.append(fence)
            i += len(fence)
        else:
            i = close.end()
    return "".join(out)


def many(name: str, arguments: list[dict[str, object]]) -> dict[str, object]:
    return {"tool_calls": [(name, a) for a in arguments]}


@pytest.mark.parametrize("platform", ["github"])
def test_a_final_comment_cut_to_fit_never_leaves_a_name_out_of_its_code_span(rig: Rig) -> None:
    """The forge's limit cuts a long final comment; the account at its end must not be cut in
    the middle of a name, or the rest of the name (mentions, HTML) renders as Markdown."""
    paths = [f"{NAME[:-3]}{i:03}" for i in range(20)]
    steps = [
        many("write_file", [{"path": p, "content": "x\n"} for p in paths]),
        many("read_file", [{"path": p} for p in paths]),
        many("run_command", [{"command": f"true {p}"} for p in paths]),
        call("finish", summary="A" * 59_000),
    ]
    rig.model.policy = lambda request: steps[min(_turns(request), len(steps) - 1)]
    thread = rig.issue(title="Docs", body="Write the docs.")
    rig.run_once()
    assert rig.state(thread).status is Status.DONE, rig.bot_comments(thread)[-1][-500:]
    final = rig.bot_comments(thread)[-1]
    assert len(final) <= comment_chars(Platform.GITHUB)
    section = final[final.index("<details><summary>What I did") :]
    assert "Files read: `docs/" in section and "did not fit" in final  # the comment was cut
    for line in section.splitlines():
        assert MENTION not in _outside_code(line), line[-300:]
    assert "Files changed" in details(final)  # the account is whole, its end included


def _turns(request: dict[str, object]) -> int:
    messages = request.get("messages") or []
    assert isinstance(messages, list)
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


BRANCH = f"x`{MENTION}`y"  # git refuses spaces in a ref name, not backticks


def test_a_forks_branch_name_is_shown_in_a_code_span_it_cannot_end(rig: Rig) -> None:
    """The final comment names the fork's branch the bot pushed to: the fork's author chose it."""
    thread = rig.forge.world.add_fork_request(
        rig.platform,
        REPO,
        author="bob",
        files={"src/app.py": "print('hi')  # lint\n"},
        title="Tidy",
        body="Small cleanup.",
        labels=["coding agent"],
        maintainer_can_modify=True,
        branch=BRANCH,
    )
    rig.model.policy = scripted(
        call("write_file", path="src/app.py", content="print('hi')\n"),
        call("finish", summary="Removed the comment."),
    )
    rig.run_once()
    assert rig.state(thread).status is Status.DONE, rig.bot_comments(thread)[-1]
    final = rig.bot_comments(thread)[-1]
    pushed = next(line for line in final.splitlines() if line.startswith("Pushed commit"))
    assert "bob/app" in pushed and "y" in pushed
    assert MENTION not in _outside_code(pushed), pushed
