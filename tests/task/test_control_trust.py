"""Issue 10, reproduction 4: labels and assignment obey the same trust rule as `/bot`.

A GitHub triage user (GitLab Reporter) can set labels and assignees; before, the bot obeyed
them while refusing the same person's `/bot` comments.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.core.config import LabelSettings
from bot.model.state import Status
from bot.model.thread import Kind, Platform, TaskKey
from bot.model.trust import Trust
from bot.store.task_files import StateStore
from bot.task.gate import Gate
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import count_tool_results
from tests.conftest import REPO, ForgeFactory
from tests.rig import Rig

TRIGGER, PAUSED, STOPPED = "coding agent", "coding agent paused", "coding agent stopped"


def _triage(server: ForgeServer, platform: str) -> None:
    server.world.repo(platform, REPO).roles["tracy"] = "triage"  # GitLab: Reporter


def _notices(rig: Rig, thread: Any) -> list[str]:
    return [b for b in rig.bot_comments(thread) if "only people with write access" in b]


def test_trigger_label_from_a_triage_user_is_ignored_and_said_once(rig: Rig) -> None:
    _triage(rig.forge, rig.platform)
    thread = rig.issue(labels=[])
    rig.forge.world.set_labels(rig.platform, REPO, thread.number, [TRIGGER], actor="tracy")
    rig.model.policy = lambda req: {"tool_calls": [("finish", {"summary": "done"})]}
    rig.run_once()
    rig.run_once()
    assert rig.model.requests == []
    assert TRIGGER not in thread.labels  # taken off: not rediscovered every poll
    assert StateStore(rig.state_dir).load(rig.key(thread)) is None
    notices = _notices(rig, thread)
    assert len(notices) == 1 and "@tracy" in notices[0]

    rig.set_labels(thread, [TRIGGER])  # now a writer (alice) adds it
    rig.run_once()
    assert rig.state(thread).status is Status.DONE
    assert len(_notices(rig, thread)) == 1


@pytest.mark.parametrize("label", [PAUSED, STOPPED])
def test_pause_or_stop_label_from_a_triage_user_is_ignored(rig: Rig, label: str) -> None:
    _triage(rig.forge, rig.platform)
    thread = rig.issue()

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        if count_tool_results(req) == 0:
            labels = [*thread.labels, label]
            rig.forge.world.set_labels(rig.platform, REPO, thread.number, labels, actor="tracy")
            return {"tool_calls": [("post_comment", {"body": "step one"})]}
        return {"tool_calls": [("finish", {"summary": "Finished anyway."})]}

    rig.model.policy = policy
    rig.run_once()
    assert rig.state(thread).status is Status.DONE
    assert thread.labels == ["coding agent done"]
    assert len(_notices(rig, thread)) == 1


def test_pause_label_from_a_writer_still_pauses(rig: Rig) -> None:
    thread = rig.issue()

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        rig.forge.world.set_labels(
            rig.platform, REPO, thread.number, [*thread.labels, PAUSED], actor="carol"
        )
        return {"tool_calls": [("post_comment", {"body": "step one"})]}

    rig.model.policy = policy
    rig.run_once()
    assert rig.state(thread).status is Status.PAUSED
    assert not _notices(rig, thread)


def test_assignment_counts_only_from_a_writer(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    _triage(server, platform)
    world = server.world
    by_triage = world.add_thread(platform, REPO, title="a", author="bob")
    world.assign(platform, REPO, by_triage.number, "coding-bot", actor="tracy")
    by_writer = world.add_thread(platform, REPO, title="b", author="bob")
    world.assign(platform, REPO, by_writer.number, "coding-bot", actor="alice")
    forge = make_forge()

    def gate(number: int) -> Gate:
        key = TaskKey(Platform(platform), REPO, Kind.ISSUE, number)
        return Gate(forge, key, "coding-bot", Trust(), LabelSettings())

    bot = frozenset({"coding-bot"})
    assert gate(by_writer.number).start_allowed(frozenset(), bot)
    assert not gate(by_triage.number).start_allowed(frozenset(), bot)
    notices = [c.body for c in by_triage.comments if "only people with write access" in c.body]
    assert len(notices) == 1 and "@tracy assigned me" in notices[0]
    assert not gate(by_triage.number).start_allowed(frozenset(), bot)
    assert len([c for c in by_triage.comments if "only people" in c.body]) == 1  # said once


def test_resume_by_label_removal_counts_only_from_a_writer(rig: Rig) -> None:
    _triage(rig.forge, rig.platform)
    thread = rig.issue()
    world = rig.forge.world

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        if count_tool_results(req) == 0:
            labels = [*thread.labels, PAUSED]
            world.set_labels(rig.platform, REPO, thread.number, labels, actor="alice")
            return {"tool_calls": [("post_comment", {"body": "step one"})]}
        return {"tool_calls": [("finish", {"summary": "Finished."})]}

    rig.model.policy = policy
    rig.run_once()
    assert rig.state(thread).status is Status.PAUSED
    world.set_labels(rig.platform, REPO, thread.number, [], actor="tracy")
    rig.run_once()
    rig.run_once()
    assert rig.state(thread).status is Status.PAUSED
    assert thread.labels == [PAUSED]  # put back
    assert len(_notices(rig, thread)) == 1 and "removed the label" in _notices(rig, thread)[0]
    world.set_labels(rig.platform, REPO, thread.number, [], actor="alice")
    rig.run_once()
    assert rig.state(thread).status is Status.DONE


def test_label_events_of_a_change_request_name_the_actor(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    kind = "pull" if platform == "github" else "mr"
    thread = server.world.add_thread(platform, REPO, kind=kind, title="c", head_ref="fix")
    server.world.set_labels(platform, REPO, thread.number, [PAUSED], kind=kind, actor="tracy")
    server.world.set_labels(platform, REPO, thread.number, [], kind=kind, actor="carol")
    key_kind = Kind.PULL if platform == "github" else Kind.MERGE_REQUEST
    events = make_forge().control_events(TaskKey(Platform(platform), REPO, key_kind, thread.number))
    assert [(e.kind, e.name, e.actor) for e in events] == [
        ("labeled", PAUSED, "tracy"),
        ("unlabeled", PAUSED, "carol"),
    ]


def test_assigning_the_bot_starts_a_task_only_from_a_writer(rig: Rig) -> None:
    _triage(rig.forge, rig.platform)
    world = rig.forge.world
    rig.model.policy = lambda req: {"tool_calls": [("finish", {"summary": "Done."})]}
    by_writer = rig.issue(labels=[], title="by writer", author="bob")
    world.assign(rig.platform, REPO, by_writer.number, "coding-bot", actor="alice")
    by_triage = rig.issue(labels=[], title="by triage", author="bob")
    world.assign(rig.platform, REPO, by_triage.number, "coding-bot", actor="tracy")
    rig.run_once()
    rig.run_once()
    assert rig.state(by_writer).status is Status.DONE
    assert StateStore(rig.state_dir).load(rig.key(by_triage)) is None
    assert len(_notices(rig, by_triage)) == 1
    assert len(rig.model.requests) == 1


def test_a_triage_users_trigger_label_does_not_hand_back_a_task_a_writer_assigned(
    rig: Rig,
) -> None:
    """The writer's old assignment starts the first run, not a second one: a finished task is
    handed back only by the trigger label or `/bot`, each from a writer (before, the standing
    assignment vouched for a triage user's trigger label under the lease)."""
    _triage(rig.forge, rig.platform)
    world = rig.forge.world
    rig.model.policy = lambda req: {"tool_calls": [("finish", {"summary": "Done."})]}
    thread = rig.issue(labels=[], author="bob")
    world.assign(rig.platform, REPO, thread.number, "coding-bot", actor="alice")
    rig.run_once()
    assert rig.state(thread).status is Status.DONE
    world.set_labels(rig.platform, REPO, thread.number, [*thread.labels, TRIGGER], actor="tracy")
    rig.run_once()
    rig.run_once()
    assert rig.state(thread).run == 1 and rig.state(thread).status is Status.DONE
    assert len(rig.model.requests) == 1
    assert TRIGGER not in thread.labels  # taken off, said once
    notices = _notices(rig, thread)
    assert len(notices) == 1 and "@tracy added the label" in notices[0]
