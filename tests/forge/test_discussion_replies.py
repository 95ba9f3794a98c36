"""A reply reaches the model as a reply naming the comment it answers, in the opening context
and in the comments that arrive while the task works; through the real python-gitlab and
PyGithub clients against the emulator (issue 19, finding 7)."""

from __future__ import annotations

from typing import Any

import pytest

from bot_sandbox.world import SComment, StepClock, SThread
from tests.conftest import REPO
from tests.rig import Rig
from tests.task.test_reviews import finish, labelled_request, note


def run_with_a_reply_arriving(rig: Rig, thread: SThread, parent: SComment) -> list[str]:
    """One reply before the task starts, one while it works; the user messages it got."""
    w = rig.forge.world
    w.reply(rig.platform, REPO, thread.number, parent.id, "Opening reply.", kind=thread.kind)
    later: list[SComment] = []

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        if not later:
            later.append(
                w.reply(rig.platform, REPO, thread.number, parent.id, "Late reply.", author="carol")
            )
            return note("Looking into it.")
        return finish("Done.")

    rig.model.policy = policy
    rig.run_once()
    return [str(e["content"]) for e in rig.conversation(thread) if e.get("role") == "user"]


@pytest.mark.parametrize("platform", ["gitlab"])  # discussions on an issue are GitLab's
def test_gitlab_issue_discussion_reply_names_its_parent(rig: Rig) -> None:
    rig.forge.world.clock = StepClock()  # type: ignore[method-assign]
    thread = rig.issue()
    parent = rig.forge.world.add_comment(
        "gitlab", REPO, thread.number, "Should this use a cache?", kind="issue"
    )
    opening, *later = run_with_a_reply_arriving(rig, thread, parent)
    assert f"reply to {parent.id} in a discussion thread" in opening  # was: "in a discussion"
    arrived = next(text for text in later if "Late reply." in text)
    assert arrived.startswith(f"[New Comment from @carol] reply to {parent.id} in a discussion")


def test_review_reply_names_its_parent(rig: Rig) -> None:
    rig.forge.world.clock = StepClock()  # type: ignore[method-assign]
    thread = labelled_request(rig)
    parent = rig.forge.world.add_review_comment(
        rig.platform, REPO, thread.number, "rename foo", file="src/util.py", line=4
    )
    parent_id = f"review:{parent.id}" if rig.platform == "github" else str(parent.id)
    opening, *later = run_with_a_reply_arriving(rig, thread, parent)
    place = f"reply to {parent_id} in the review thread on `src/util.py` line 4"
    assert place in opening  # was: "reply in the review thread", the parent unnamed
    arrived = next(text for text in later if "Late reply." in text)
    assert arrived.startswith(f"[New Comment from @carol] {place} (reply_to: ")
