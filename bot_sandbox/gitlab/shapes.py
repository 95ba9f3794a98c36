"""GitLab's JSON for users, issues and merge requests, notes and discussions, and commits."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot_sandbox.world import SComment, SCommit, SRepo, SThread, SUser

# Gitlab::Database::MAX_TEXT_SIZE_LIMIT (lib/gitlab/database.rb, gitlab-foss#61974): a longer
# note is refused with 400 and the model's validation message.
NOTE_CHARS = 1_000_000
NOTE_TOO_LONG = "note is too long (maximum is 1000000 characters)"


def timestamp(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.000Z")


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
        "created_at": timestamp(thread.created_at),
        "updated_at": timestamp(thread.updated_at),
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


def listed_json(base: str, repo: SRepo, thread: SThread) -> dict[str, Any]:
    sign = "!" if thread.kind == "mr" else "#"
    data = thread_json(base, repo, thread)
    data["references"] = {
        "short": f"{sign}{thread.number}",
        "relative": f"{sign}{thread.number}",
        "full": f"{repo.path}{sign}{thread.number}",
    }
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
        "created_at": timestamp(note.created_at),
        "updated_at": timestamp(note.updated_at),
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


def commit_json(commit: SCommit) -> dict[str, Any]:
    return {
        "id": commit.sha,
        "short_id": commit.sha[:8],
        "title": commit.message.splitlines()[0] if commit.message else "",
        "message": commit.message,
        "parent_ids": commit.parents,
        "author_name": commit.author,
    }
