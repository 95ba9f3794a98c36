"""Review feedback read whole, through the real PyGithub / python-gitlab clients: review texts,
review comments with their file, line and hunk, GitLab discussions and internal notes, and
replies that land in the review thread."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.forge.types import Kind, Platform, TaskKey
from bot.sandbox.forge_server import ForgeServer
from bot.sandbox.world import StepClock, SThread
from tests.conftest import REPO, ForgeFactory, kind_for

CHANGED = "import os\n\n\ndef foo():\n    return os.getcwd()\n"


def change_request(server: ForgeServer, platform: str, **kwargs: object) -> SThread:
    """An open pull/merge request whose head adds `src/util.py`."""
    w = server.world
    kind = kind_for(platform, True)
    thread = w.add_thread(platform, REPO, kind=kind, head_ref="feature", **kwargs)  # type: ignore[arg-type]
    thread.head_sha = w.push(platform, REPO, "feature", {"src/util.py": CHANGED}, "add util")
    return thread


def key_of(platform: str, thread: SThread) -> TaskKey:
    kind = {"issue": Kind.ISSUE, "pull": Kind.PULL, "mr": Kind.MERGE_REQUEST}[thread.kind]
    return TaskKey(Platform(platform), REPO, kind, thread.number)


@pytest.mark.parametrize("platform", ["github"])  # reviews with a verdict are GitHub's
def test_review_texts_are_comments(
    server: ForgeServer, make_forge: ForgeFactory, platform: str
) -> None:
    thread = change_request(server, platform)
    w = server.world
    w.add_review(REPO, thread.number, "Request changes: rename foo", state="CHANGES_REQUESTED")
    # A COMMENTED review without text only wraps line comments: not a comment of its own.
    w.add_review(
        REPO, thread.number, "", state="COMMENTED", comments=[("src/util.py", 4, "why foo?")]
    )
    w.add_review(REPO, thread.number, "", state="APPROVED", author="carol")
    comments = make_forge().list_comments(key_of(platform, thread))
    summaries = [c for c in comments if c.kind == "review_summary"]
    assert [(c.body, c.review_state, c.author) for c in summaries] == [
        ("Request changes: rename foo", "changes_requested", "alice"),
        ("", "approved", "carol"),
    ]
    assert all(c.id.startswith("pull-review:") for c in summaries)
    assert [c.body for c in comments if c.kind == "review"] == ["why foo?"]


@pytest.mark.parametrize("platform", ["github"])
def test_review_texts_honour_since(
    server: ForgeServer, make_forge: ForgeFactory, platform: str
) -> None:
    server.world.clock = StepClock()  # distinct seconds
    thread = change_request(server, platform)
    w = server.world
    old = w.add_review(REPO, thread.number, "first look: fine", state="COMMENTED")
    later = old.submitted_at + timedelta(seconds=1)
    w.add_review(REPO, thread.number, "Request changes: rename foo")
    forge = make_forge()
    bodies = [c.body for c in forge.list_comments(key_of(platform, thread), since=later)]
    assert bodies == ["Request changes: rename foo"]


def test_review_comment_keeps_file_line_and_hunk(
    server: ForgeServer, make_forge: ForgeFactory, platform: str
) -> None:
    thread = change_request(server, platform)
    server.world.add_review_comment(
        platform, REPO, thread.number, "rename foo", file="src/util.py", line=4, author="carol"
    )
    [comment] = make_forge().list_comments(key_of(platform, thread))
    assert comment.kind == "review"
    assert comment.position is not None
    assert (comment.position.path, comment.position.line) == ("src/util.py", 4)
    assert comment.position.side == "RIGHT"
    if platform == "github":  # GitLab sends no hunk with a note
        assert comment.position.diff_hunk.startswith("@@ ")
        assert comment.position.diff_hunk.endswith("+def foo():")


@pytest.mark.parametrize("platform", ["gitlab"])  # GitLab: a removed line has only old_line
def test_gitlab_diff_note_on_a_removed_line(
    server: ForgeServer, make_forge: ForgeFactory, platform: str
) -> None:
    thread = change_request(server, platform)
    server.world.add_review_comment(
        platform, REPO, thread.number, "why gone?", file="src/app.py", old_line=1
    )
    [comment] = make_forge().list_comments(key_of(platform, thread))
    assert comment.position is not None
    assert (comment.position.path, comment.position.line, comment.position.side) == (
        "src/app.py",
        1,
        "LEFT",
    )


def test_reply_lands_in_the_review_thread(
    server: ForgeServer, make_forge: ForgeFactory, platform: str
) -> None:
    thread = change_request(server, platform)
    w = server.world
    target = w.add_review_comment(
        platform, REPO, thread.number, "rename foo", file="src/util.py", line=4
    )
    answer = w.reply(platform, REPO, thread.number, target.id, "and bar?", kind=thread.kind)
    forge = make_forge()
    key = key_of(platform, thread)
    listed = {c.body: c for c in forge.list_comments(key)}
    assert listed["and bar?"].in_reply_to == listed["rename foo"].id
    assert listed["and bar?"].thread_id == listed["rename foo"].thread_id is not None
    # Answering the reply: GitHub takes replies to the top-level comment only; the adapter
    # finds it. GitLab adds the note to the discussion.
    posted = forge.post_comment(key, "renamed to bar", reply_to=listed["and bar?"].id)
    landed = thread.comments[-1]
    assert landed.body == "renamed to bar" and landed.author.login == "coding-bot"
    assert landed.in_reply_to == target.id
    if platform == "gitlab":
        assert landed.discussion == target.discussion == answer.discussion
    assert posted.thread_id == listed["rename foo"].thread_id
    # The reply is in the listing the marker look-up reads.
    assert posted.id in {c.id for c in forge.list_comments(key)}


def test_reply_to_a_plain_comment_or_unknown_id_goes_to_the_conversation(
    server: ForgeServer, make_forge: ForgeFactory, platform: str
) -> None:
    w = server.world
    issue = w.add_thread(platform, REPO)
    key = key_of(platform, issue)
    forge = make_forge()
    for target in ("issue:424242", "999999", "nonsense"):
        forge.post_comment(key, f"to {target}", reply_to=target)
    assert [(c.body, c.in_reply_to, c.review) for c in issue.comments] == [
        (f"to {t}", None, False) for t in ("issue:424242", "999999", "nonsense")
    ]


@pytest.mark.parametrize("platform", ["gitlab"])  # internal notes are GitLab's
def test_gitlab_internal_note_is_marked(
    server: ForgeServer, make_forge: ForgeFactory, platform: str
) -> None:
    w = server.world
    issue = w.add_thread(platform, REPO)
    w.add_comment(platform, REPO, issue.number, "public", kind="issue")
    w.add_internal_note(REPO, issue.number, "customer ACME pays 40k", kind="issue")
    comments = make_forge().list_comments(key_of(platform, issue))
    assert [(c.body, c.internal) for c in comments] == [
        ("public", False),
        ("customer ACME pays 40k", True),
    ]
