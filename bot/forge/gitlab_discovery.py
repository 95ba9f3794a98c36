"""GitLab discovery across projects: group listings by label, and To-Do items for mentions.

A group's issue and merge request listings cover its projects and subgroups and filter by label
(docs.gitlab.com/api/issues, "List group issues"; api/merge_requests, "List group merge
requests"); `labels=a,b` wants every label, so there is one query per watched label and kind,
per top-level group: the cost of an idle cycle does not depend on the number of projects.
Threads assigned to the bot come from the instance listings with `scope=assigned_to_me`.
A project whose namespace is a user, not a group (404), is listed per project.

Mentions: `GET /todos?action=mentioned` and `action=directly_addressed` list the pending To-Do
items the mentions created (docs.gitlab.com/api/todos), every page. An item is marked done only
once its task's start is recorded (`bot.forge.inbox`), and only an item of a watched project:
the To-Do list of a person's token is otherwise left as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import gitlab

from bot.core.clock import parse_time
from bot.core.log import get_logger
from bot.forge._util import LRU
from bot.forge.errors import AuthError, ForgeError, NotFound, RateLimited
from bot.forge.inbox import Checked, Outcome, Recorded, settled
from bot.model.thread import Kind, Permission, TaskKey, TaskSummary

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


def read_todos(
    gl: gitlab.Gitlab,
    call: Call,
    summarize: Summarize,
    permission: Callable[[str, str], Permission],
    repos: Sequence[str],
    found: LRU[str, TaskSummary],
) -> list[Checked]:
    """The pending To-Do items of the mentions, every page, each checked, oldest first (GitLab
    lists them newest first: `TodosFinder#sort` defaults to `id_desc`, app/finders/
    todos_finder.rb). Nothing is marked done here (`settle_todos`). `found` remembers the
    items that found a task to start, while they wait for it to be recorded."""
    wanted = {r.lower(): r for r in repos}
    todos: dict[int, dict[str, Any]] = {}
    for action in TODO_ACTIONS:
        listing = partial(gl.todos.list, action=action, state="pending", get_all=True)
        for todo in call("todos", listing):
            todos[int(todo.id)] = dict(todo.attributes)
    ordered = [todos[ident] for ident in sorted(todos)]
    checked: list[Checked] = []
    for index, data in enumerate(ordered):
        try:
            checked.append(_check_todo(data, wanted, summarize, permission, found))
        except RateLimited as exc:
            # Every further request would be refused: this one and the rest wait.
            log.warning(
                "mention_check_failed",
                platform="gitlab",
                error=str(exc),
                status=exc.status,
                waiting=len(ordered) - index,
            )
            checked += [_checked(d, Outcome.FAILED) for d in ordered[index:]]
            break
    return checked


def settle_todos(gl: gitlab.Gitlab, call: Call, checked: list[Checked], recorded: Recorded) -> None:
    """Mark done the items that need no start or whose task's start is recorded; the others
    stay pending for the next read (the pending state is the cursor)."""
    done, _first_open = settled(checked, recorded)
    for index, item in enumerate(done):
        try:
            mark_done(gl, call, item.id)
        except ForgeError as exc:
            log.warning(
                "mention_settle_failed",
                platform="gitlab",
                error=str(exc),
                status=exc.status,
                unsettled=len(done) - index,
            )
            return


def mark_done(gl: gitlab.Gitlab, call: Call, ident: str) -> None:
    # POST /todos/:id/mark_as_done (docs.gitlab.com/api/todos, "Mark a to-do item as done").
    call("todo_done", partial(gl.http_post, f"/todos/{ident}/mark_as_done"))


def thread_todos(gl: gitlab.Gitlab, call: Call, key: TaskKey) -> list[str]:
    """The ids of the pending mention To-Do items of one thread."""
    kind = "MergeRequest" if key.kind is Kind.MERGE_REQUEST else "Issue"
    ids: set[str] = set()
    for action in TODO_ACTIONS:
        listing = partial(gl.todos.list, action=action, state="pending", type=kind, get_all=True)
        for todo in call("todos", listing):
            data = dict(todo.attributes)
            project = str((data.get("project") or {}).get("path_with_namespace") or "")
            iid = (data.get("target") or {}).get("iid")
            if project.lower() == key.repo.lower() and iid == key.number:
                ids.add(str(todo.id))
    return sorted(ids, key=int)


def _check_todo(
    data: dict[str, Any],
    wanted: dict[str, str],
    summarize: Summarize,
    permission: Callable[[str, str], Permission],
    found: LRU[str, TaskSummary],
) -> Checked:
    project = str((data.get("project") or {}).get("path_with_namespace") or "")
    target = data.get("target") or {}
    kinds = {"Issue": Kind.ISSUE, "MergeRequest": Kind.MERGE_REQUEST}
    kind = kinds.get(str(data.get("target_type")))
    if project.lower() not in wanted or kind is None:
        return _checked(data, Outcome.SKIPPED)  # not the bot's: never marked done
    cached = found.get(str(data["id"]))
    if cached is not None:
        return _checked(data, Outcome.HANDLED, cached)
    if target.get("state") != "opened":
        return _checked(data, Outcome.HANDLED)
    repo = wanted[project.lower()]
    author = str((data.get("author") or {}).get("username") or "")
    try:
        writer = bool(author) and permission(repo, author).can_write
    except (AuthError, RateLimited):
        raise
    except ForgeError as exc:
        log.warning(
            "mention_check_failed", platform="gitlab", repo=repo, error=str(exc), status=exc.status
        )
        return _checked(data, Outcome.FAILED)
    if not writer:
        log.info("mention_ignored", repo=repo, author=author, reason="not a writer")
        return _checked(data, Outcome.HANDLED)
    summary = replace(summarize(repo, kind, target), mentioned=True)
    found.put(str(data["id"]), summary)
    return _checked(data, Outcome.HANDLED, summary)


def _checked(data: dict[str, Any], outcome: Outcome, summary: TaskSummary | None = None) -> Checked:
    when = parse_time(str(data.get("updated_at") or data.get("created_at") or ""))
    return Checked(str(data["id"]), when, outcome, summary)
