"""Where a task's page is: `/tasks/<platform>/<repository>/<kind>/<number>`, e.g.
`/tasks/github/acme/app/issue/12` or `/tasks/gitlab/group/sub/proj/merge_request/7`.

One place for both directions, so the final comment's link (`ui.public_url`) and the page
that answers it (`bot/service/ui/`) cannot disagree. A repository path may have any number
of segments (GitLab subgroups); kind and number are read from the end.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from bot.model.thread import Kind, Platform, TaskKey

PREFIX = "/tasks/"


def task_path(key: TaskKey) -> str:
    """The page's path, every segment percent-encoded."""
    repo = "/".join(quote(part, safe="") for part in key.repo.split("/"))
    return f"{PREFIX}{key.platform.value}/{repo}/{key.kind.value}/{key.number}"


def page_url(public_url: str, key: TaskKey) -> str:
    """The page's address under `ui.public_url` (which may end in a slash or a path)."""
    return public_url.rstrip("/") + task_path(key)


def parse_task_path(path: str) -> TaskKey | None:
    """The task a page path names (None: not a task path, or not a valid task)."""
    if not path.startswith(PREFIX):
        return None
    parts = [unquote(part) for part in path[len(PREFIX) :].rstrip("/").split("/")]
    if len(parts) < 5 or not parts[-1].isdigit() or not parts[-1].isascii():
        return None
    platform, repo, kind, number = parts[0], "/".join(parts[1:-2]), parts[-2], int(parts[-1])
    try:
        key = TaskKey(Platform(platform), repo, Kind(kind), number)
        return TaskKey.parse(str(key))  # the same rules as every other task reference
    except ValueError:
        return None
