"""GitLab discovery across projects: group listings by label, and To-Do items for mentions.

A group's issue and merge request listings cover its projects and subgroups and filter by label
(docs.gitlab.com/api/issues, "List group issues"; api/merge_requests, "List group merge
requests"); `labels=a,b` wants every label, so there is one query per watched label and kind,
per top-level group: the cost of an idle cycle does not depend on the number of projects.
Threads assigned to the bot come from the instance listings with `scope=assigned_to_me`.
A project whose namespace is a user, not a group (404), is listed per project.

Mentions: `GET /todos?action=mentioned` and `action=directly_addressed` list the pending To-Do
items the mentions created (docs.gitlab.com/api/todos); each one handled is marked done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import gitlab

from bot.forge.errors import NotFound
from bot.forge.types import Kind, Permission, TaskKey, TaskSummary
from bot.log import get_logger

log = get_logger(__name__)
Call = Callable[..., Any]
Summarize = Callable[[str, Kind, dict[str, Any]], TaskSummary]
TODO_ACTIONS = ("mentioned", "directly_addressed")


def project_of(item: dict[str, Any]) -> str | None:
    """`group/project` from an item's `references.full` (`group/project#3`, `...!7`)."""
    full = str((item.get("references") or {}).get("full") or "")
    for sign in ("!", "#"):
        path, found, number = full.rpartition(sign)
        if found and number.isdigit():
            return path
    return None


def list_across(
    gl: gitlab.Gitlab,
    call: Call,
    summarize: Summarize,
    repos: Sequence[str],
    labels: Sequence[str],
    assignee: bool,
) -> tuple[list[TaskSummary], list[str]]:
    wanted = {r.lower(): r for r in repos}
    groups: dict[str, list[str]] = {}
    for name in repos:
        groups.setdefault(name.split("/")[0], []).append(name)
    found: dict[TaskKey, TaskSummary] = {}
    uncovered: list[str] = []
    for group, projects in groups.items():
        manager = gl.groups.get(group, lazy=True)
        try:
            for label in labels:
                for section, kind in (
                    (manager.issues, Kind.ISSUE),
                    (manager.mergerequests, Kind.MERGE_REQUEST),
                ):
                    items = call(
                        "group_list",
                        partial(section.list, get_all=True, state="opened", labels=label),
                    )
                    _collect(found, wanted, summarize, kind, items)
        except NotFound:
            uncovered.extend(projects)  # a user namespace: no group listing
    if assignee:
        mine: list[tuple[Any, Kind]] = [
            (gl.issues, Kind.ISSUE),
            (gl.mergerequests, Kind.MERGE_REQUEST),
        ]
        for listing, kind in mine:
            items = call(
                "assigned_list",
                partial(listing.list, get_all=True, state="opened", scope="assigned_to_me"),
            )
            _collect(found, wanted, summarize, kind, items)
    covered = {r.lower() for r in uncovered}
    tasks = [t for t in found.values() if t.key.repo.lower() not in covered]
    return sorted(tasks, key=lambda s: s.key), uncovered


def changed_in_group(
    gl: gitlab.Gitlab,
    call: Call,
    summarize: Summarize,
    group: str,
    repos: Sequence[str],
    updated_after: str,
) -> list[TaskSummary]:
    """Open threads of the group's watched projects updated after `updated_after`."""
    wanted = {r.lower(): r for r in repos}
    manager = gl.groups.get(group, lazy=True)
    found: dict[TaskKey, TaskSummary] = {}
    for section, kind in (
        (manager.issues, Kind.ISSUE),
        (manager.mergerequests, Kind.MERGE_REQUEST),
    ):
        listing = partial(section.list, get_all=True, state="opened", updated_after=updated_after)
        _collect(found, wanted, summarize, kind, call("group_changes", listing))
    return list(found.values())


def _collect(
    found: dict[TaskKey, TaskSummary],
    wanted: dict[str, str],
    summarize: Summarize,
    kind: Kind,
    items: list[Any],
) -> None:
    for item in items:
        data = dict(item.attributes)
        project = project_of(data)
        if project is not None and project.lower() in wanted:
            summary = summarize(wanted[project.lower()], kind, data)
            found[summary.key] = summary


def mentioned(
    gl: gitlab.Gitlab,
    call: Call,
    summarize: Summarize,
    permission: Callable[[str, str], Permission],
    repos: Sequence[str],
) -> list[TaskSummary]:
    """Open threads of `repos` where a writer mentioned the bot: its pending To-Do items."""
    wanted = {r.lower(): r for r in repos}
    found: dict[TaskKey, TaskSummary] = {}
    for action in TODO_ACTIONS:
        todos = call("todos", partial(gl.todos.list, action=action, state="pending", get_all=True))
        for todo in todos:
            summary = _from_todo(dict(todo.attributes), wanted, summarize, permission)
            if summary is not None:
                found[summary.key] = summary
            call("todo_done", todo.mark_as_done)
    return sorted(found.values(), key=lambda s: s.key)


def _from_todo(
    data: dict[str, Any],
    wanted: dict[str, str],
    summarize: Summarize,
    permission: Callable[[str, str], Permission],
) -> TaskSummary | None:
    project = str((data.get("project") or {}).get("path_with_namespace") or "")
    target = data.get("target") or {}
    kinds = {"Issue": Kind.ISSUE, "MergeRequest": Kind.MERGE_REQUEST}
    kind = kinds.get(str(data.get("target_type")))
    if project.lower() not in wanted or kind is None or target.get("state") != "opened":
        return None
    repo = wanted[project.lower()]
    author = str((data.get("author") or {}).get("username") or "")
    if not author or not permission(repo, author).can_write:
        log.info("mention_ignored", repo=repo, author=author, reason="not a writer")
        return None
    summary = summarize(repo, kind, target)
    return TaskSummary(
        key=summary.key,
        title=summary.title,
        labels=summary.labels,
        assignees=summary.assignees,
        updated_at=summary.updated_at,
        mentioned=True,
    )
