"""Writing a repository: a commit of several file actions on a branch."""

from __future__ import annotations

import re
from typing import Any

from bot_sandbox.gitlab.lookup import PROJECT, project_of
from bot_sandbox.gitlab.shapes import commit_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import EXECUTABLE, REGULAR, SRepo


def create_commit(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = project_of(site.world, m)
    body = req.body or {}
    name = str(body.get("branch", ""))
    assert req.user is not None
    members_only = repo.fork_of is not None and name not in repo.branches
    if not site.world.may_push(repo, name, req.user.login) or (
        members_only and req.user.login not in repo.roles
    ):
        # A fork's branch takes pushes from its own members, or from members who can merge
        # into the target when its merge request allows it (allow_collaboration).
        raise HttpError(403, "You are not allowed to push into this branch")
    if repo.is_protected(name):
        # https://docs.gitlab.com/user/project/repository/branches/protected/ : a push
        # by someone not allowed to push to the branch is a 403.
        raise HttpError(403, "You are not allowed to push into this branch")
    base = _start(repo, body)
    files = dict(repo.commits[base].files)
    modes = dict(repo.commits[base].modes)
    for action in body.get("actions") or []:
        _apply_action(repo, name, action, files, modes)
    assert req.user is not None
    message = str(body.get("commit_message", ""))
    commit = repo.commit(files, message, [base], req.user.login, modes)
    repo.branches[name] = commit.sha
    site.world.head_moved(repo, name)
    return Response(201, commit_json(commit))


def _start(repo: SRepo, body: dict[str, Any]) -> str:
    """The commit the new one goes on top of, as `Commits::CreateService` validates it
    (app/services/commits/create_service.rb): an existing branch takes the commit on its head,
    and naming a start (`start_sha`/`start_branch`) for a branch that exists already is refused
    unless `force` (which would overwrite the branch: the bot never sends it)."""
    name = str(body.get("branch", ""))
    start = body.get("start_sha") or body.get("start_branch")
    different = body.get("start_sha") or (body.get("start_branch") not in (None, name))
    if name in repo.branches and different and not body.get("force"):
        raise HttpError(
            400,
            f"A branch called '{name}' already exists. Switch to that branch in order to make "
            "changes",
        )
    if name in repo.branches:
        return repo.branches[name]
    found = repo.resolve(str(start)) if start else None
    if found is None:
        raise HttpError(400, "You can only create or edit files when you are on a branch")
    return found.sha


def _apply_action(
    repo: SRepo, branch: str, action: dict[str, Any], files: dict[str, bytes], modes: dict[str, str]
) -> None:
    """One action of "Create a commit with multiple files and actions"
    (https://docs.gitlab.com/api/commits/#create-a-commit-with-multiple-files-and-actions), as
    lib/gitlab/git/index.rb applies it: `update` keeps the file's mode (`add_blob(options, mode:
    file_entry[:mode])`), `create` makes a regular file, `chmod` sets or clears the executable
    bit (`execute_filemode`). `last_commit_id` on update/move/delete is checked as
    Files::MultiService#validate_file_status! does: the file's last commit on the branch must be
    the same as its last commit as of `last_commit_id`, else 400 "The file has changed since you
    started editing it: <path>" (app/services/files/multi_service.rb, base_service.rb)."""
    path, kind = str(action.get("file_path", "")), action.get("action")
    exists = path in files
    if kind == "create" and exists:
        raise HttpError(400, "A file with this name already exists")
    if kind in ("update", "delete", "chmod") and not exists:
        raise HttpError(400, "A file with this name doesn't exist")
    last = action.get("last_commit_id")
    if kind in ("update", "move", "delete") and last and branch in repo.branches:
        on_branch = repo.last_commit_for(path, repo.branches[branch])
        as_of = repo.last_commit_for(path, str(last)) if str(last) in repo.commits else None
        if on_branch and as_of and on_branch != as_of:
            raise HttpError(400, f"The file has changed since you started editing it: {path}")
    if kind == "delete":
        del files[path]
        modes.pop(path, None)
    elif kind == "create":
        files[path] = str(action.get("content", "")).encode()
        modes.pop(path, None)
    elif kind == "update":
        files[path] = str(action.get("content", "")).encode()
    elif kind == "chmod":
        if action.get("execute_filemode"):
            modes[path] = EXECUTABLE
        else:
            modes.pop(path, None)
    else:
        raise HttpError(400, f"unknown action {kind!r}")
    if modes.get(path) == REGULAR:
        modes.pop(path)


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("POST", PROJECT + r"/repository/commits", create_commit)
]
