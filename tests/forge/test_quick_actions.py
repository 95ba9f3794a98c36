"""GitLab quick actions: the emulator runs them as GitLab does, and nothing the bot writes runs
one. People's quick actions keep working, and so does their `/bot`."""

from __future__ import annotations

import re
from typing import Any

import gitlab
import pytest

from bot.forge.gitlab import GitLabForge
from bot.forge.quick_actions import neutralise
from bot.model.thread import Kind, Platform, TaskKey
from bot.task.posting import marker
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.gitlab.quick_actions import extract
from bot_sandbox.world import SChangeRequest, SThread
from tests.conftest import ALICE_TOKEN, REPO, ForgeFactory
from tests.rig import Rig
from tests.test_agent_e2e import DONE, call, scripted

GITLAB = pytest.mark.parametrize("platform", ["gitlab"])  # quick actions are GitLab's

HOSTILE = (
    "Done, see below.\n"
    "/close\n"
    "/reopen\n"
    "/merge\n"
    "/approve\n"
    "/assign @bob\n"
    "/label ~pwned\n"
    "/unlabel\n"
    "/lock\n"
    "/title Owned\n"
    "/CLOSE\n"
    "\r/close\r\n"
    "/clo\rse\n"
    "~~~\n/close\n~~~\n"
)


def as_alice(server: ForgeServer) -> Any:
    return gitlab.Gitlab(server.url, private_token=ALICE_TOKEN).projects.get(REPO, lazy=True)


def issue(server: ForgeServer, **kwargs: Any) -> SThread:
    return server.world.add_thread("gitlab", REPO, **kwargs)


def merge_request(server: ForgeServer) -> SThread:
    change = SChangeRequest("Feature", "", "feature", "main", False)
    server.world.push("gitlab", REPO, "feature", {"new.txt": "x\n"}, "add new.txt")
    return server.world.open_change_request("gitlab", REPO, "alice", change)


def untouched(thread: SThread, labels: list[str]) -> None:
    assert thread.state == "open" and thread.title != "Owned"
    assert thread.labels == labels and thread.assignees == [] and not thread.locked
    assert thread.approved_by == []
    assert not any(c.system for c in thread.comments)  # GitLab logs every action it runs


# -- the emulator runs people's quick actions --------------------------------------------------


def test_a_persons_close_closes_and_a_command_only_note_is_not_saved(
    server: ForgeServer,
) -> None:
    thread = issue(server)
    note = as_alice(server).issues.get(thread.number, lazy=True).notes.create({"body": "/close"})
    assert thread.state == "closed"
    assert "Closed this issue." in note.attributes["summary"]
    assert [c.body for c in thread.comments] == ["closed"]  # only GitLab's system note
    assert thread.comments[0].system


def test_a_persons_actions_run_and_leave_the_rest_of_the_note(server: ForgeServer) -> None:
    thread = issue(server, labels=["old"])
    notes = as_alice(server).issues.get(thread.number, lazy=True).notes
    body = 'Thanks!\n/label ~bug ~"needs review"\n/unlabel ~old\n/assign @carol\n/lock\n/title New'
    note = notes.create({"body": body})
    assert note.attributes["body"] == "Thanks!"
    assert thread.labels == ["bug", "needs review"] and thread.title == "New"
    assert [a.login for a in thread.assignees] == ["carol"] and thread.locked
    notes.create({"body": "/unassign\n/unlock\n/close"})
    notes.create({"body": "/reopen"})
    assert thread.assignees == [] and not thread.locked and thread.state == "open"


def test_merge_request_merge_and_approve_and_description(server: ForgeServer) -> None:
    thread = merge_request(server)
    mrs = as_alice(server).mergerequests
    notes = mrs.get(thread.number, lazy=True).notes
    notes.create({"body": "/merge\nno head given"})
    assert thread.state == "open"  # current GitLab merges only at the head the author saw
    notes.create({"body": "/approve\n/merge", "merge_request_diff_head_sha": thread.head_sha})
    repo = server.world.repo("gitlab", REPO)
    assert thread.state == "merged" and thread.approved_by == ["alice"]
    files = repo.files("main")
    assert files is not None and "new.txt" in files
    server.world.push("gitlab", REPO, "second", {"b.txt": "b\n"}, "b")
    created = mrs.create(
        {
            "source_branch": "second",
            "target_branch": "main",
            "title": "B",
            "description": "Hi\n/label ~x",
        }
    )
    assert created.attributes["description"] == "Hi" and created.attributes["labels"] == ["x"]


def test_where_gitlab_does_not_run_them_the_emulator_does_not(server: ForgeServer) -> None:
    thread = issue(server)
    notes = as_alice(server).issues.get(thread.number, lazy=True).notes
    for body in (
        "```\n/close\n```",  # fenced code block
        ">>>\n/close\n>>>",  # multi-line quote
        "<div>\n/close\n</div>",  # HTML block
        "see /close",  # not at the start of a line
        " /close",  # indented
        "/closed",  # not a command name
        "/labels~x",  # no space before the argument
    ):
        notes.create({"body": body})
        assert thread.state == "open", body
    bob = server.world.add_user("bob-reader", token="reader-token")  # read access: no rights
    server.world.repo("gitlab", REPO).roles[bob.login] = "read"
    reader = gitlab.Gitlab(server.url, private_token="reader-token").projects.get(REPO, lazy=True)
    reader.issues.get(thread.number, lazy=True).notes.create({"body": "/label ~x\n/close\nhi"})
    assert thread.state == "open" and thread.labels == []


def test_edits_run_quick_actions_too(server: ForgeServer) -> None:
    thread = issue(server)
    notes = as_alice(server).issues.get(thread.number, lazy=True).notes
    note = notes.create({"body": "hello"})
    notes.update(note.attributes["id"], {"body": "hello\n/close"})
    assert thread.state == "closed"


# -- nothing the bot writes runs one -----------------------------------------------------------


@GITLAB
def test_bot_notes_edits_and_descriptions_run_nothing(
    server: ForgeServer, make_forge: ForgeFactory
) -> None:
    forge = make_forge()
    assert isinstance(forge, GitLabForge)
    for thread, kind in ((issue(server), Kind.ISSUE), (merge_request(server), Kind.MERGE_REQUEST)):
        key = TaskKey(Platform.GITLAB, REPO, kind, thread.number)
        tag = marker(key, 3)
        posted = forge.post_comment(key, f"{HOSTILE}\n\n{tag}")
        untouched(thread, [])
        assert posted.body.endswith(tag)  # the hidden marker is intact and still found
        assert "\\/close\n\\/reopen\n\\/merge" in posted.body  # escaped: reads as /close
        forge.edit_comment(key, posted.id, f"edited\n{HOSTILE}")
        untouched(thread, [])
    server.world.push("gitlab", REPO, "bot/1-x", {"a.txt": "a\n"}, "a")
    request = forge.open_change_request(REPO, "bot/1-x", "main", "X", HOSTILE)
    opened = server.world.thread("gitlab", REPO, request.number, "mr")
    untouched(opened, [])
    assert "\\/approve" in opened.body


@GITLAB
def test_any_write_through_the_client_is_neutralised(
    server: ForgeServer, make_forge: ForgeFactory
) -> None:
    """A write path added later (a discussion reply, a description update) cannot forget."""
    forge = make_forge()
    assert isinstance(forge, GitLabForge)
    thread = issue(server)
    path = f"/projects/{REPO.replace('/', '%2F')}/issues/{thread.number}"
    forge._gl.http_post(f"{path}/notes", post_data={"body": "/close"})
    forge._gl.http_put(path, post_data={"description": "/label ~pwned\n/close"})
    untouched(thread, [])
    assert thread.body == "\\/label ~pwned\n\\/close"


@GITLAB
def test_a_model_written_reply_does_not_close_the_issue(rig: Rig) -> None:
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    rig.model.policy = scripted(
        call("post_comment", body="Working on it.\n/close\n/assign @bob"),
        call("edit_file", path="src/app.py", old="'hi'", new="'hello'"),
        call("finish", summary=f"Changed it.\n{HOSTILE}"),
    )
    rig.run_once()
    untouched(thread, [DONE])
    requests = [t for t in rig.forge.world.all_threads() if t.kind == "mr"]
    assert len(requests) == 1
    assert requests[0].state == "open" and requests[0].approved_by == []
    assert requests[0].labels == [] and not requests[0].locked
    assert "\\/close" in rig.bot_comments(thread)[-1]


@GITLAB
def test_a_persons_slash_bot_still_reaches_the_bot(rig: Rig) -> None:
    """GitLab strips the quick actions it knows; `/bot` is not one of them and stays."""
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    rig.model.policy = scripted(call("finish", summary="Nothing to do yet."))
    rig.run_once()
    notes = as_alice(rig.forge).issues.get(thread.number, lazy=True).notes
    notes.create({"body": "/bot\n/label ~urgent\nPlease do it now."})
    assert "urgent" in thread.labels
    rig.model.policy = scripted(call("finish", summary="Done now."))
    rig.run_once()
    assert rig.state(thread).run == 2
    assert "Please do it now." in str(rig.model.requests[-1]["messages"])


# -- the escape itself ------------------------------------------------------------------------

# GitLab's extractor before it learned `inline_code` (lib/gitlab/quick_actions/extractor.rb in
# 13.x): a second oracle, since older servers are still run.
OLDER_EXTRACTOR = re.compile(
    r"(?P<code>^```.+?\n```$)|(?P<html>^<[^>]+?>\n.+?\n</[^>]+?>$)|(?P<quote>^>>>.+?\n>>>$)"
    r"|(?:^/(?P<cmd>close|merge|approve|assign)(?:[ ](?P<arg>[^\n]*))?(?:\n|$))",
    re.DOTALL | re.MULTILINE | re.IGNORECASE,
)


def commands(text: str) -> list[str]:
    older = [m["cmd"] for m in OLDER_EXTRACTOR.finditer(text.replace("\r", "")) if m["cmd"]]
    return [name for name, _arg in extract(text)[1]] + older


@pytest.mark.parametrize(
    "text",
    [
        HOSTILE,
        "/close",
        "a\n/merge",
        "\r\n/approve\r\n",
        "/clo\u017fe",  # long s folds to s under GitLab's case-insensitive match
        "<div>\ntext\n```\n</div>\n/close\n```",  # ends an older GitLab's HTML skip early
    ],
)
def test_neutralised_text_has_no_command_for_gitlab(text: str) -> None:
    assert commands(text)  # the input really runs something (the oracles work)
    out = neutralise(text)
    assert commands(out) == []
    for line in out.replace("\r", "").split("\n"):
        assert not line.startswith("/") or line[1:2] in ("", " ", "/", "*")
    assert neutralise(out) == out  # idempotent: a second pass adds nothing


def test_neutralise_leaves_everything_else_alone() -> None:
    text = "see /close\n// a comment\n/* c */\n/ x\n<!-- bot:x:1 -->\n  /close\n"
    assert neutralise(text) == text
    assert neutralise("/close\nok") == "\\/close\nok"
