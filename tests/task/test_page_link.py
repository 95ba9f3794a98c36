"""A task's page path and the task it names are one mapping, in both directions, for every
kind on both forges and repositories with subgroups; anything else names no task."""

from __future__ import annotations

import pytest

from bot.model.thread import TaskKey
from bot.task.page_link import page_url, parse_task_path, task_path


@pytest.mark.parametrize(
    "ref",
    ["github:acme/app#12", "github:acme/app#12p", "gitlab:group/sub/proj#3", "gitlab:g/p!7"],
)
def test_a_task_path_names_its_task(ref: str) -> None:
    key = TaskKey.parse(ref)
    assert parse_task_path(task_path(key)) == key


def test_the_path_reads_as_the_task() -> None:
    key = TaskKey.parse("gitlab:group/sub/proj!7")
    assert task_path(key) == "/tasks/gitlab/group/sub/proj/merge_request/7"
    assert page_url("https://bot.example/x/", key) == (
        "https://bot.example/x/tasks/gitlab/group/sub/proj/merge_request/7"
    )


@pytest.mark.parametrize(
    "path",
    [
        "/tasks/github/acme/app/issue/x",
        "/tasks/github/acme/app/merge_request/1",  # no merge requests on GitHub
        "/tasks/gitlab/acme/app/pull/1",
        "/tasks/bitbucket/acme/app/issue/1",
        "/tasks/github/app/issue/1",  # no owner
        "/tasks/github/acme/app/issue/\u0661",  # a digit, but not an ASCII one
        "/elsewhere/github/acme/app/issue/1",
    ],
)
def test_anything_else_names_no_task(path: str) -> None:
    assert parse_task_path(path) is None
