"""GitLab v4 REST subset, as python-gitlab calls it (projects addressed by URL-encoded path)."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from bot_sandbox import gitlab_quick_actions as quick_actions
from bot_sandbox.forge_server import (
    HttpError,
    Request,
    Response,
    Route,
    archive_response,
    read_only_when_archived,
)
from bot_sandbox.world import (
    EXECUTABLE,
    REGULAR,
    ROLES,
    SChangeRequest,
    SComment,
    SCommit,
    SRepo,
    SThread,
    SUser,
    blob_sha,
    listing,
)

if TYPE_CHECKING:
    from bot_sandbox.forge_server import ForgeServer

PROJECT = r"/api/v4/projects/(?P<project>[^/]+)"
_ACCESS = {"none": 0, "read": 10, "triage": 20, "write": 30, "maintain": 40, "admin": 50}


def _ts(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _parse(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise HttpError(400, f"invalid timestamp {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def user_json(base: str, user: SUser) -> dict[str, Any]:
    return {
        "id": user.id,
        "username": user.login,
        "name": user.login,
        "state": "active",
        "avatar_url": f"{base}/avatars/{user.id}",
        "web_url": f"{base}/{user.login}",
        "bot": user.is_bot,
    }


def thread_json(base: str, repo: SRepo, thread: SThread) -> dict[str, Any]:
    section = "merge_requests" if thread.kind == "mr" else "issues"
    data: dict[str, Any] = {
        "id": thread.id,
        "iid": thread.number,
        "project_id": repo.id,
        "title": thread.title,
        "description": thread.body,
        "state": "opened" if thread.state == "open" else thread.state,
        "created_at": _ts(thread.created_at),
        "updated_at": _ts(thread.updated_at),
        "labels": list(thread.labels),
        "author": user_json(base, thread.author),
        "assignees": [user_json(base, a) for a in thread.assignees],
        "assignee": user_json(base, thread.assignees[0]) if thread.assignees else None,
        "user_notes_count": sum(1 for c in thread.comments if not c.system),
        "discussion_locked": thread.locked,
        "web_url": f"{base}/{repo.path}/-/{section}/{thread.number}",
    }
    if thread.kind == "mr":
        data.update(
            {
                "source_branch": thread.head_ref,
                "target_branch": thread.base_ref,
                "sha": thread.head_sha,
                # A fork's merge request names the fork as its source project, and says
                # whether members who can merge may push to its branch there.
                # https://docs.gitlab.com/api/merge_requests/#get-single-mr
                "source_project_id": thread.head_repo_id or repo.id,
                "target_project_id": repo.id,
                "allow_collaboration": bool(thread.head_repo and thread.maintainer_can_modify),
                "allow_maintainer_to_push": bool(thread.head_repo and thread.maintainer_can_modify),
                "draft": bool(thread.change and thread.change.draft),
            }
        )
    return data


def note_json(base: str, thread: SThread, note: SComment) -> dict[str, Any]:
    # `type`: "DiffNote" on a line of the diff, "DiscussionNote" in a thread, null for a plain
    # comment; `position` only on DiffNotes; `internal` (GitLab 15.0+) and its deprecated
    # alias `confidential` both present: GitLab's lib/api/entities/note.rb (`expose :position,
    # if: ... note.is_a?(DiffNote)`, `expose :confidential?, as: :internal`) and
    # https://docs.gitlab.com/ee/api/notes.html
    threaded = note.in_reply_to is not None or any(
        c.in_reply_to == note.id for c in thread.comments
    )
    data: dict[str, Any] = {
        "id": note.id,
        "type": "DiffNote" if note.review else ("DiscussionNote" if threaded else None),
        "body": note.body,
        "author": user_json(base, note.author),
        "created_at": _ts(note.created_at),
        "updated_at": _ts(note.updated_at),
        "system": note.system,
        "noteable_id": thread.id,
        "noteable_type": "MergeRequest" if thread.kind == "mr" else "Issue",
        "noteable_iid": thread.number,
        "resolvable": note.review,
        "confidential": note.internal,
        "internal": note.internal,
    }
    if note.review:
        data["position"] = _position_json(thread, note)
    return data


def _position_json(thread: SThread, note: SComment) -> dict[str, Any]:
    """A DiffNote's position: an added line has only `new_line`, a removed line only
    `old_line`, an unchanged line both. https://docs.gitlab.com/ee/api/discussions.html"""
    where = note.position
    path = where.path if where else "README.md"
    return {
        "base_sha": thread.head_sha,
        "start_sha": thread.head_sha,
        "head_sha": where.commit if where else thread.head_sha,
        "old_path": path,
        "new_path": path,
        "position_type": "text",
        "old_line": where.old_line if where else None,
        "new_line": where.line if where else 1,
        "line_range": None,
    }


def discussion_json(base: str, thread: SThread, notes: list[SComment]) -> dict[str, Any]:
    """https://docs.gitlab.com/ee/api/discussions.html: a thread and its notes, oldest first."""
    return {
        "id": notes[0].discussion,
        "individual_note": len(notes) == 1 and not notes[0].review,
        "notes": [note_json(base, thread, n) for n in notes],
    }


def routes(server: ForgeServer) -> list[Route]:
    world = server.world

    def project_of(match: re.Match[str]) -> SRepo:
        ident = unquote(match["project"])
        for repo in world.repos.values():
            if repo.platform == "gitlab" and (repo.path == ident or str(repo.id) == ident):
                return repo
        raise HttpError(404, "404 Project Not Found")

    def thread_of(repo: SRepo, section: str, number: str) -> SThread:
        thread = repo.thread("mr" if section == "merge_requests" else "issue", int(number))
        if thread is None:
            raise HttpError(404, "404 Not found")
        return thread

    def get_user(req: Request, m: re.Match[str]) -> Response:
        assert req.user is not None
        return Response(body={**user_json(req.base_url, req.user), "is_admin": False})

    def list_users(req: Request, m: re.Match[str]) -> Response:
        login = req.query.get("username")
        users = [u for u in world.users.values() if login is None or u.login == login]
        return Response(body=[user_json(req.base_url, u) for u in users], paginate=True)

    def get_project(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        return Response(
            body={
                "id": repo.id,
                "name": repo.path.rsplit("/", 1)[-1],
                "path": repo.path.rsplit("/", 1)[-1],
                "path_with_namespace": repo.path,
                # An empty project has no default branch (null) and `empty_repo: true`.
                "default_branch": repo.default_branch if repo.commits else None,
                "empty_repo": not repo.commits,
                "archived": repo.archived,
                "web_url": f"{req.base_url}/{repo.path}",
            }
        )

    def list_threads(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        kind = "mr" if m["section"] == "merge_requests" else "issue"
        state = req.query.get("state", "all")
        labels = [x for x in req.query.get("labels", "").split(",") if x]
        assignee = req.query.get("assignee_username")
        source = req.query.get("source_branch")
        after = _parse(req.query["updated_after"]) if "updated_after" in req.query else None
        order = req.query.get("order_by", "created_at")
        threads = [t for t in repo.threads.values() if t.kind == kind]
        threads.sort(
            key=lambda t: t.updated_at if order == "updated_at" else t.created_at, reverse=True
        )
        items = []
        for thread in threads:
            gl_state = "opened" if thread.state == "open" else thread.state
            if state != "all" and gl_state != state:
                continue
            if any(label not in thread.labels for label in labels):
                continue
            if assignee and assignee not in [a.login for a in thread.assignees]:
                continue
            if source and thread.head_ref != source:
                continue
            if after is not None and thread.updated_at < after:
                continue
            items.append(thread_json(req.base_url, repo, thread))
        return Response(body=items, paginate=True)

    def get_thread(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        return Response(
            body=thread_json(req.base_url, repo, thread_of(repo, m["section"], m["iid"]))
        )

    def update_thread(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        thread = thread_of(repo, m["section"], m["iid"])
        body = req.body or {}
        labels = list(thread.labels)
        if "labels" in body:
            labels = [x for x in str(body["labels"]).split(",") if x]
        labels += [x for x in str(body.get("add_labels", "")).split(",") if x]
        removed = {x for x in str(body.get("remove_labels", "")).split(",") if x}
        assert req.user is not None
        kept = [x for x in labels if x not in removed]
        world.set_labels("gitlab", repo.path, thread.number, kept, thread.kind, req.user.login)
        if isinstance(body.get("description"), str):
            done = quick_actions.run(world, repo, thread, req.user, body["description"])
            thread.body = done.text
        return Response(body=thread_json(req.base_url, repo, thread))

    def label_events(req: Request, m: re.Match[str]) -> Response:
        # https://docs.gitlab.com/api/resource_label_events/ : who added or removed which
        # label, oldest first; `user` is who did it, `action` is "add" or "remove".
        repo = project_of(m)
        thread = thread_of(repo, m["section"], m["iid"])
        items = [
            {
                "id": e.id,
                "user": user_json(req.base_url, e.actor),
                "created_at": _ts(e.at),
                "resource_type": "MergeRequest" if thread.kind == "mr" else "Issue",
                "resource_id": thread.id,
                "label": {
                    "id": abs(hash((repo.path, e.name))) % 10**6,
                    "name": e.name,
                    "color": "#ededed",
                    "description": None,
                },
                "action": "add" if e.kind == "labeled" else "remove",
            }
            for e in thread.events
            if e.kind in ("labeled", "unlabeled")
        ]
        return Response(body=items, paginate=True)

    def visible(req: Request, repo: SRepo, thread: SThread) -> list[SComment]:
        # Internal notes are readable by Reporter and up only (gitlab-org/gitlab#363045).
        role = repo.roles.get(req.user.login, "none") if req.user else "none"
        member = ROLES.index(role) >= ROLES.index("triage") if role in ROLES else False
        return [c for c in thread.comments if member or not c.internal]

    def list_notes(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        thread = thread_of(repo, m["section"], m["iid"])
        order = req.query.get("order_by", "created_at")
        descending = req.query.get("sort", "desc") == "desc"
        notes = sorted(
            visible(req, repo, thread),
            key=lambda n: (n.updated_at if order == "updated_at" else n.created_at, n.id),
            reverse=descending,
        )
        return Response(body=[note_json(req.base_url, thread, n) for n in notes], paginate=True)

    def create_note(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        thread = thread_of(repo, m["section"], m["iid"])
        body = (req.body or {}).get("body")
        if not isinstance(body, str) or not body:
            raise HttpError(400, "body is missing")
        assert req.user is not None
        head = (req.body or {}).get("merge_request_diff_head_sha")
        done = quick_actions.run(world, repo, thread, req.user, body, head)
        if done.commands_only:
            return _commands_only(done)
        note = world.add_comment(
            "gitlab", repo.path, thread.number, done.text, author=req.user.login, kind=thread.kind
        )
        return Response(201, note_json(req.base_url, thread, note))

    def list_discussions(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        thread = thread_of(repo, m["section"], m["iid"])
        grouped: dict[str, list[SComment]] = {}
        for note in sorted(visible(req, repo, thread), key=lambda n: (n.created_at, n.id)):
            grouped.setdefault(world.discussion_of(note), []).append(note)
        items = [discussion_json(req.base_url, thread, notes) for notes in grouped.values()]
        return Response(body=items, paginate=True)

    def reply(req: Request, m: re.Match[str]) -> Response:
        # "Add note to existing merge request thread" / "... issue thread":
        # POST .../discussions/:discussion_id/notes with `body`.
        repo = project_of(m)
        thread = thread_of(repo, m["section"], m["iid"])
        first = next(
            (n for n in thread.comments if world.discussion_of(n) == m["discussion"]), None
        )
        if first is None:
            raise HttpError(404, "404 Discussion Not Found")
        body = (req.body or {}).get("body")
        if not isinstance(body, str) or not body:
            raise HttpError(400, "body is missing")
        assert req.user is not None
        note = world.reply(
            "gitlab",
            repo.path,
            thread.number,
            first.id,
            body,
            author=req.user.login,
            kind=thread.kind,
        )
        return Response(201, note_json(req.base_url, thread, note))

    def update_note(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        thread = thread_of(repo, m["section"], m["iid"])
        note = next((n for n in thread.comments if n.id == int(m["note"])), None)
        if note is None:
            raise HttpError(404, "404 Not found")
        body = (req.body or {}).get("body")
        if not isinstance(body, str) or not body:
            raise HttpError(400, "body is missing")
        if req.user is None or req.user.login != note.author.login:
            raise HttpError(403, "403 Forbidden")
        done = quick_actions.run(world, repo, thread, req.user, body)  # edits run them too
        if done.commands_only:
            thread.comments.remove(note)  # Notes::UpdateService deletes a commands-only note
            return _commands_only(done)
        world.edit_comment(note.id, done.text)
        return Response(body=note_json(req.base_url, thread, note))

    def member(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        user = next((u for u in world.users.values() if u.id == int(m["user"])), None)
        role = repo.roles.get(user.login) if user else None
        if user is None or role is None or role == "none":
            raise HttpError(404, "404 Not found")
        return Response(body={**user_json(req.base_url, user), "access_level": _access(role)})

    def raw_file(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        ref = req.query.get("ref") or repo.default_branch
        path = unquote(m["path"])
        files = repo.files(ref)
        if files is None or path not in files:
            raise HttpError(404, "404 File Not Found")
        return Response(raw=files[path], headers={"Content-Type": "text/plain"})

    def archive(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        if req.user is not None and not server.take_gitlab_archive(req.user.login):
            # GitLab.com: 5 archive requests a minute per user; the application rate limiter
            # answers 429 with this body and no Retry-After (gitlab-org/gitlab!25750, !30668).
            raise HttpError(429, "This endpoint has been requested too many times. Try later.")
        commit = repo.resolve(req.query.get("sha") or repo.default_branch)
        if commit is None:
            raise HttpError(404, "404 Commit Not Found")
        return archive_response(
            repo, commit, f"{repo.path.rsplit('/', 1)[-1]}-{commit.sha}-{commit.sha}"
        )

    def branch(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        name = unquote(m["branch"])
        if name not in repo.branches:
            raise HttpError(404, "404 Branch Not Found")
        commit = repo.commits[repo.branches[name]]
        return Response(
            body={
                "name": name,
                "commit": commit_json(commit),
                "protected": name == repo.default_branch,
            }
        )

    def commit_json(commit: SCommit) -> dict[str, Any]:
        return {
            "id": commit.sha,
            "short_id": commit.sha[:8],
            "title": commit.message.splitlines()[0] if commit.message else "",
            "message": commit.message,
            "parent_ids": commit.parents,
            "author_name": commit.author,
        }

    def file_meta(req: Request, m: re.Match[str]) -> Response:
        # "Get file from repository": content plus the commit that last changed the file
        # (`last_commit_id`), which writers send back to detect a concurrent change.
        # https://docs.gitlab.com/api/repository_files/#get-file-from-repository
        repo = project_of(m)
        commit = repo.resolve(req.query.get("ref") or "")
        path = unquote(m["path"])
        if commit is None or path not in commit.files:
            raise HttpError(404, "404 File Not Found")
        data = commit.files[path]
        return Response(
            body={
                "file_name": path.rsplit("/", 1)[-1],
                "file_path": path,
                "size": len(data),
                "encoding": "base64",
                "content": base64.b64encode(data).decode(),
                "content_sha256": hashlib.sha256(data).hexdigest(),
                "ref": req.query.get("ref"),
                "blob_id": hashlib.sha1(data).hexdigest(),
                "commit_id": commit.sha,
                "last_commit_id": repo.last_commit_for(path, commit.sha),
                "execute_filemode": commit.modes.get(path) == EXECUTABLE,
            }
        )

    def tree(req: Request, m: re.Match[str]) -> Response:
        # "List repository tree": the entries directly under `path` at `ref`, each with its git
        # `mode` (100644, 100755, 120000, 040000) and object `id`.
        # https://docs.gitlab.com/api/repositories/#list-repository-tree
        repo = project_of(m)
        commit = repo.resolve(req.query.get("ref") or repo.default_branch)
        where = req.query.get("path", "").strip("/")
        prefix = f"{where}/" if where else ""
        entries = listing(commit.files, commit.modes, prefix) if commit else {}
        if commit is None or (where and not entries):
            raise HttpError(404, "404 Tree Not Found")
        items = [
            {
                "id": blob_sha(data)
                if data is not None
                else hashlib.sha1(name.encode()).hexdigest(),
                "name": name,
                "type": "tree" if data is None else "blob",
                "path": prefix + name,
                "mode": mode,
            }
            for name, (mode, data) in entries.items()
        ]
        return Response(body=items, paginate=True)

    def raw_blob(req: Request, m: re.Match[str]) -> Response:
        # "Raw blob content" by git object id. https://docs.gitlab.com/api/repositories/
        data = project_of(m).blob(m["sha"])
        if data is None:
            raise HttpError(404, "404 Blob Not Found")
        return Response(raw=data, headers={"Content-Type": "text/plain"})

    def create_commit(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        body = req.body or {}
        name = str(body.get("branch", ""))
        assert req.user is not None
        members_only = repo.fork_of is not None and name not in repo.branches
        if not world.may_push(repo, name, req.user.login) or (
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
        world.head_moved(repo, name)
        return Response(201, commit_json(commit))

    def compare(req: Request, m: re.Match[str]) -> Response:
        # "Compare branches, tags or commits": with `straight=false` (the default) from the
        # merge base of `from` and `to`; `commits` are those of `to` since it.
        # https://docs.gitlab.com/api/repositories/#compare-branches-tags-or-commits
        repo = project_of(m)
        start, end = req.query.get("from", ""), req.query.get("to", "")
        head = repo.resolve(end)
        straight = req.query.get("straight", "false").lower() == "true"
        base_sha = start if straight else repo.merge_base(start, end)
        base, origin = repo.resolve(base_sha or ""), repo.resolve(start)
        if head is None or base is None or origin is None:
            raise HttpError(404, "404 Ref Not Found")
        ahead = repo.ancestors(head.sha) - repo.ancestors(origin.sha)
        diffs = [
            {
                "old_path": path,
                "new_path": path,
                "new_file": path not in base.files,
                "deleted_file": path not in head.files,
                "renamed_file": False,
                "diff": "",
            }
            for path in sorted(set(base.files) | set(head.files))
            if base.files.get(path) != head.files.get(path)
            or base.modes.get(path) != head.modes.get(path)
        ]
        return Response(
            body={
                "commit": commit_json(head),
                "commits": [commit_json(repo.commits[sha]) for sha in sorted(ahead)],
                "diffs": diffs,
                "compare_timeout": False,
                "compare_same_ref": start == end,
            }
        )

    def create_mr(req: Request, m: re.Match[str]) -> Response:
        repo = project_of(m)
        body = req.body or {}
        source, target = str(body.get("source_branch", "")), str(body.get("target_branch", ""))
        if source not in repo.branches or target not in repo.branches or not body.get("title"):
            raise HttpError(400, "source_branch, target_branch and title are required")
        if any(
            # Scoped to the source project (MergeRequest#validate_branches, app/models/
            # merge_request.rb): a fork's request from a branch of that name is another's.
            t.kind == "mr" and t.state == "open" and t.head_ref == source and not t.head_repo
            for t in repo.threads.values()
        ):
            raise HttpError(409, "Another open merge request already exists for this source branch")
        title = str(body["title"])
        draft = title.lower().startswith(("draft:", "[draft]")) or bool(body.get("draft"))
        assert req.user is not None
        change = SChangeRequest(title, str(body.get("description") or ""), source, target, draft)
        thread = world.open_change_request("gitlab", repo.path, req.user.login, change)
        thread.body = quick_actions.run(world, repo, thread, req.user, thread.body).text
        return Response(201, thread_json(req.base_url, repo, thread))

    thread = PROJECT + r"/(?P<section>issues|merge_requests)/(?P<iid>\d+)"
    table: list[tuple[str, str, Any]] = [
        ("GET", r"/api/v4/user", get_user),
        ("GET", r"/api/v4/users", list_users),
        ("GET", PROJECT, get_project),
        ("GET", PROJECT + r"/(?P<section>issues|merge_requests)", list_threads),
        ("GET", thread, get_thread),
        ("PUT", thread, update_thread),
        ("GET", thread + "/notes", list_notes),
        ("GET", thread + "/resource_label_events", label_events),
        ("POST", thread + "/notes", create_note),
        ("PUT", thread + r"/notes/(?P<note>\d+)", update_note),
        ("GET", thread + "/discussions", list_discussions),
        ("POST", thread + r"/discussions/(?P<discussion>[0-9a-f]+)/notes", reply),
        ("GET", PROJECT + r"/members/all/(?P<user>\d+)", member),
        ("GET", PROJECT + r"/repository/files/(?P<path>[^/]+)/raw", raw_file),
        ("GET", PROJECT + r"/repository/files/(?P<path>[^/]+)", file_meta),
        ("GET", PROJECT + r"/repository/archive(?:\.tar\.gz)?", archive),
        ("GET", PROJECT + r"/repository/branches/(?P<branch>.+)", branch),
        ("GET", PROJECT + r"/repository/tree", tree),
        ("GET", PROJECT + r"/repository/blobs/(?P<sha>[0-9a-f]+)/raw", raw_blob),
        ("POST", PROJECT + r"/repository/commits", create_commit),
        ("GET", PROJECT + r"/repository/compare", compare),
        ("POST", PROJECT + r"/merge_requests", create_mr),
    ]

    # An archived project is read-only: writes are refused with 403
    # (https://docs.gitlab.com/user/project/working_with_projects/#archive-a-project).
    return read_only_when_archived(
        table, "project", lambda m: project_of(m).archived, "403 Forbidden"
    )


def _commands_only(done: quick_actions.Outcome) -> Response:
    """A note of nothing but commands is not saved (lib/api/helpers/notes_helpers.rb)."""
    if not done.summary:
        raise HttpError(400, "Commands did not apply")
    return Response(202, {"commands_changes": done.changes, "summary": done.summary})


def _access(role: str) -> int:
    return _ACCESS.get(role, 0) if role in ROLES else 0


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
