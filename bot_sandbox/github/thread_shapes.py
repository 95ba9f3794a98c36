"""GitHub's JSON for issues, pull requests and their comments (review comments included)."""

from __future__ import annotations

from typing import Any

from bot_sandbox.github.shapes import association, label_json, repo_json, timestamp, user_json
from bot_sandbox.world import SComment, SRepo, SThread


def issue_json(base: str, repo: SRepo, thread: SThread) -> dict[str, Any]:
    url = f"{base}/repos/{repo.path}/issues/{thread.number}"
    data: dict[str, Any] = {
        "id": thread.id,
        "node_id": f"I_{thread.id}",
        "url": url,
        "repository_url": f"{base}/repos/{repo.path}",
        "labels_url": f"{url}/labels{{/name}}",
        "comments_url": f"{url}/comments",
        "events_url": f"{url}/events",
        "html_url": f"{base}/{repo.path}/issues/{thread.number}",
        "number": thread.number,
        "state": thread.state,
        "state_reason": None,
        "title": thread.title,
        "body": thread.body,
        "user": user_json(base, thread.author),
        "labels": [label_json(base, repo, name) for name in thread.labels],
        "assignee": user_json(base, thread.assignees[0]) if thread.assignees else None,
        "assignees": [user_json(base, a) for a in thread.assignees],
        "milestone": None,
        "locked": False,
        "active_lock_reason": None,
        "comments": sum(1 for c in thread.comments if not c.review),
        "closed_at": None,
        "created_at": timestamp(thread.created_at),
        "updated_at": timestamp(thread.updated_at),
        "author_association": association(repo, thread.author),
    }
    if thread.kind == "pull":
        pull_url = f"{base}/repos/{repo.path}/pulls/{thread.number}"
        data["pull_request"] = {
            "url": pull_url,
            "html_url": f"{base}/{repo.path}/pull/{thread.number}",
            "diff_url": f"{base}/{repo.path}/pull/{thread.number}.diff",
            "patch_url": f"{base}/{repo.path}/pull/{thread.number}.patch",
            "merged_at": None,
        }
    return data


def pull_json(base: str, repo: SRepo, thread: SThread, fork: SRepo | None = None) -> dict[str, Any]:
    """`fork`: the repository the request's head lives in, when it is not `repo`."""
    issue = issue_json(base, repo, thread)
    url = f"{base}/repos/{repo.path}/pulls/{thread.number}"

    def ref(name: str, sha: str, fork: SRepo | None = None) -> dict[str, Any]:
        owner = fork.owner if fork else repo.owner
        head_repo = repo_json(base, repo)
        if fork:  # a request from a fork: `head.repo` is the fork (`fork: true`)
            head_repo = {**repo_json(base, fork), "fork": True}
        return {
            "label": f"{owner.login}:{name}",
            "ref": name,
            "sha": sha,
            "user": user_json(base, owner),
            "repo": head_repo,
        }

    links = {
        "self": url,
        "html": issue["html_url"],
        "issue": issue["url"],
        "comments": issue["comments_url"],
        "review_comments": f"{url}/comments",
        "review_comment": f"{base}/repos/{repo.path}/pulls/comments{{/number}}",
        "commits": f"{url}/commits",
        "statuses": f"{base}/repos/{repo.path}/statuses/{thread.head_sha}",
    }
    return {
        **{k: issue[k] for k in ("id", "node_id", "number", "state", "title", "body", "user")},
        **{k: issue[k] for k in ("labels", "assignee", "assignees", "milestone", "locked")},
        **{k: issue[k] for k in ("created_at", "updated_at", "closed_at", "author_association")},
        "url": url,
        "html_url": f"{base}/{repo.path}/pull/{thread.number}",
        "diff_url": f"{base}/{repo.path}/pull/{thread.number}.diff",
        "patch_url": f"{base}/{repo.path}/pull/{thread.number}.patch",
        "issue_url": issue["url"],
        "commits_url": f"{url}/commits",
        "review_comments_url": f"{url}/comments",
        "review_comment_url": links["review_comment"],
        "comments_url": issue["comments_url"],
        "statuses_url": links["statuses"],
        "_links": {name: {"href": href} for name, href in links.items()},
        "head": ref(thread.head_ref, thread.head_sha, fork),
        "base": ref(thread.base_ref, repo.branch_sha(thread.base_ref)),
        "merge_commit_sha": None,
        "merged_at": None,
        "merged": False,
        "mergeable": True,
        "mergeable_state": "clean",
        "merged_by": None,
        "auto_merge": None,
        "draft": bool(thread.change and thread.change.draft),
        # Whether people with write access here may push to the fork's branch (false for a
        # request from the same repository). https://docs.github.com/rest/pulls/pulls
        "maintainer_can_modify": bool(thread.head_repo and thread.maintainer_can_modify),
        "comments": issue["comments"],
        "review_comments": sum(1 for c in thread.comments if c.review),
        "commits": 1,
        "additions": 0,
        "deletions": 0,
        "changed_files": 0,
    }


def comment_json(base: str, repo: SRepo, thread: SThread, comment: SComment) -> dict[str, Any]:
    issue_url = f"{base}/repos/{repo.path}/issues/{thread.number}"
    common = {
        "id": comment.id,
        "node_id": f"C_{comment.id}",
        "user": user_json(base, comment.author),
        "body": comment.body,
        "created_at": timestamp(comment.created_at),
        "updated_at": timestamp(comment.updated_at),
        "author_association": association(repo, comment.author),
    }
    if not comment.review:
        return {
            **common,
            "url": f"{base}/repos/{repo.path}/issues/comments/{comment.id}",
            "html_url": f"{base}/{repo.path}/issues/{thread.number}#issuecomment-{comment.id}",
            "issue_url": issue_url,
        }
    url = f"{base}/repos/{repo.path}/pulls/comments/{comment.id}"
    html = f"{base}/{repo.path}/pull/{thread.number}#discussion_r{comment.id}"
    pull_url = f"{base}/repos/{repo.path}/pulls/{thread.number}"
    data = {
        **common,
        "url": url,
        "html_url": html,
        "pull_request_url": pull_url,
        "pull_request_review_id": comment.review_id or comment.id,
        "commit_id": thread.head_sha,
        "_links": {
            "self": {"href": url},
            "html": {"href": html},
            "pull_request": {"href": pull_url},
        },
        **_position_json(comment),
    }
    if comment.in_reply_to is not None:
        data["in_reply_to_id"] = comment.in_reply_to
    return data


def _position_json(comment: SComment) -> dict[str, Any]:
    """Where a review comment sits, in GitHub's terms: `line` in the file on `side` (RIGHT: the
    new version, LEFT: the old one, for a removed line); `position`, the line index in the diff,
    is "closing down" per the OpenAPI description; `line` replaces it.
    https://docs.github.com/rest/pulls/comments#create-a-review-comment-for-a-pull-request"""
    where = comment.position
    if where is None:  # seeded without a position: a comment on line 1 of the README
        return {
            "path": "README.md",
            "diff_hunk": "@@ -1 +1 @@",
            "position": 1,
            "original_position": 1,
            "original_commit_id": "",
            "line": 1,
            "original_line": 1,
            "side": "RIGHT",
            "start_line": None,
            "original_start_line": None,
            "start_side": None,
            "subject_type": "line",
        }
    side = "RIGHT" if where.line is not None else "LEFT"
    line = where.line if where.line is not None else where.old_line
    index = max(1, len(where.diff_hunk.splitlines()) - 1)  # lines below the hunk's header
    return {
        "path": where.path,
        "diff_hunk": where.diff_hunk,
        "position": index,
        "original_position": index,
        "original_commit_id": where.commit,
        "line": line,
        "original_line": line,
        "side": side,
        "start_line": None,
        "original_start_line": None,
        "start_side": None,
        "subject_type": "line",
    }
