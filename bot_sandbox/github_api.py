"""GitHub REST subset. Response bodies follow GitHub's OpenAPI description (@octokit/openapi);
`tests/test_emulator_openapi.py` validates them against the schemas extracted from it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

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
    SYMLINK,
    SChangeRequest,
    SComment,
    SCommit,
    SEvent,
    SRepo,
    SReview,
    SThread,
    SUser,
    blob_sha,
    listing,
    tree_sha,
)

if TYPE_CHECKING:
    from bot_sandbox.forge_server import ForgeServer

REPO = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"


def _ts(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def user_json(base: str, user: SUser) -> dict[str, Any]:
    url = f"{base}/users/{user.login}"
    return {
        "login": user.login,
        "id": user.id,
        "node_id": f"U_{user.id}",
        "avatar_url": f"{base}/avatars/{user.id}",
        "gravatar_id": "",
        "url": url,
        "html_url": f"{base}/{user.login}",
        "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}",
        "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs",
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}",
        "received_events_url": f"{url}/received_events",
        "type": "Bot" if user.is_bot else "User",
        "site_admin": False,
    }


def label_json(base: str, repo: SRepo, name: str) -> dict[str, Any]:
    return {
        "id": abs(hash((repo.path, name))) % 10**9,
        "node_id": f"L_{name}",
        "url": f"{base}/repos/{repo.path}/labels/{name}",
        "name": name,
        "description": None,
        "color": "ededed",
        "default": False,
    }


def repo_json(base: str, repo: SRepo) -> dict[str, Any]:
    url = f"{base}/repos/{repo.path}"
    templated = {
        name: f"{url}/{name.removesuffix('_url')}{{/x}}"
        for name in [
            "archive_url",
            "assignees_url",
            "blobs_url",
            "branches_url",
            "collaborators_url",
            "comments_url",
            "commits_url",
            "compare_url",
            "contents_url",
            "git_commits_url",
            "git_refs_url",
            "git_tags_url",
            "issue_comment_url",
            "issue_events_url",
            "issues_url",
            "keys_url",
            "labels_url",
            "milestones_url",
            "notifications_url",
            "pulls_url",
            "releases_url",
            "statuses_url",
            "trees_url",
        ]
    }
    plain = {
        name: f"{url}/{name.removesuffix('_url')}"
        for name in [
            "contributors_url",
            "deployments_url",
            "downloads_url",
            "events_url",
            "forks_url",
            "hooks_url",
            "languages_url",
            "merges_url",
            "stargazers_url",
            "subscribers_url",
            "subscription_url",
            "tags_url",
            "teams_url",
        ]
    }
    open_count = sum(1 for t in repo.threads.values() if t.state == "open")
    return {
        **templated,
        **plain,
        "id": repo.id,
        "node_id": f"R_{repo.id}",
        "name": repo.path.split("/")[1],
        "full_name": repo.path,
        "owner": user_json(base, repo.owner),
        "private": False,
        "html_url": f"{base}/{repo.path}",
        "description": None,
        "fork": False,
        "url": url,
        "clone_url": f"{base}/{repo.path}.git",
        "git_url": f"git://127.0.0.1/{repo.path}.git",
        "ssh_url": f"git@127.0.0.1:{repo.path}.git",
        "svn_url": f"{base}/{repo.path}",
        "mirror_url": None,
        "homepage": None,
        "language": None,
        "forks": 0,
        "forks_count": 0,
        "stargazers_count": 0,
        "watchers_count": 0,
        "watchers": 0,
        "size": 1,
        "default_branch": repo.default_branch,
        "open_issues": open_count,
        "open_issues_count": open_count,
        "has_issues": True,
        "has_projects": False,
        "has_wiki": False,
        "has_pages": False,
        "has_downloads": False,
        "has_discussions": False,
        "archived": repo.archived,
        "disabled": False,
        "license": None,
        "pushed_at": _ts(repo.created_at),
        "created_at": _ts(repo.created_at),
        "updated_at": _ts(repo.created_at),
        "network_count": 0,
        "subscribers_count": 0,
    }


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
        "created_at": _ts(thread.created_at),
        "updated_at": _ts(thread.updated_at),
        "author_association": _association(repo, thread.author),
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
        "created_at": _ts(comment.created_at),
        "updated_at": _ts(comment.updated_at),
        "author_association": _association(repo, comment.author),
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


def review_json(base: str, repo: SRepo, thread: SThread, review: SReview) -> dict[str, Any]:
    """One pull request review: its own text and verdict (`state`), without its line comments.
    https://docs.github.com/rest/pulls/reviews#list-reviews-for-a-pull-request"""
    html = f"{base}/{repo.path}/pull/{thread.number}#pullrequestreview-{review.id}"
    pull_url = f"{base}/repos/{repo.path}/pulls/{thread.number}"
    return {
        "id": review.id,
        "node_id": f"PRR_{review.id}",
        "user": user_json(base, review.author),
        "body": review.body,
        "state": review.state,
        "html_url": html,
        "pull_request_url": pull_url,
        "_links": {"html": {"href": html}, "pull_request": {"href": pull_url}},
        "submitted_at": _ts(review.submitted_at),
        "commit_id": review.commit_id,
        "author_association": _association(repo, review.author),
    }


def event_json(base: str, repo: SRepo, thread: SThread, event: SEvent) -> dict[str, Any]:
    """One issue event, oldest first, as `GET /repos/{owner}/{repo}/issues/{n}/events` lists
    them (https://docs.github.com/en/rest/issues/events#list-issue-events): `actor` is who
    did it; `labeled`/`unlabeled` carry the label, `assigned`/`unassigned` the assignee."""
    data: dict[str, Any] = {
        "id": event.id,
        "node_id": f"LE_{event.id}",
        "url": f"{base}/repos/{repo.path}/issues/events/{event.id}",
        "actor": user_json(base, event.actor),
        "event": event.kind,
        "commit_id": None,
        "commit_url": None,
        "created_at": _ts(event.at),
        "performed_via_github_app": None,
    }
    if event.kind in ("labeled", "unlabeled"):
        data["label"] = {"name": event.name, "color": "ededed"}
    else:
        assignee = next((a for a in thread.assignees if a.login == event.name), None)
        data["assignee"] = user_json(base, assignee or SUser(event.name, 0))
        data["assigner"] = user_json(base, event.actor)
    return data


def _association(repo: SRepo, user: SUser) -> str:
    if user.login == repo.owner.login:
        return "OWNER"
    role = repo.roles.get(user.login, "none")
    return "COLLABORATOR" if ROLES.index(role) >= ROLES.index("write") else "NONE"


def routes(server: ForgeServer) -> list[Route]:
    world = server.world

    def repo_of(match: re.Match[str]) -> SRepo:
        key = ("github", f"{match['owner']}/{match['name']}")
        if key not in world.repos:
            raise HttpError(404, "Not Found")
        return world.repos[key]

    def thread_of(repo: SRepo, number: str, kinds: tuple[str, ...] = ("issue", "pull")) -> SThread:
        for kind in kinds:
            thread = repo.thread(kind, int(number))
            if thread is not None:
                return thread
            if (kind, int(number)) in repo.deleted:
                # "If the issue was deleted from a repository where the authenticated user has
                # read access, the API returns a 410 Gone status." (REST docs, Get an issue)
                raise HttpError(410, "This issue was deleted")
        raise HttpError(404, "Not Found")

    def head_repo_of(thread: SThread) -> SRepo | None:
        return world.repos.get(("github", thread.head_repo)) if thread.head_repo else None

    def refuse_push(repo: SRepo, branch: str | None, req: Request) -> None:
        """Writes to a fork by someone who may not push there. GitHub hides what a token may
        not write to behind 404 (403 "Resource not accessible by ..." for tokens limited to
        other repositories); either way the write is refused."""
        assert req.user is not None
        if repo.fork_of is None:
            return
        login = req.user.login
        allowed = (
            world.may_push(repo, branch, login)
            if branch is not None
            else any(world.may_push(repo, b, login) for b in repo.branches)
        )
        if not allowed:
            raise HttpError(404, "Not Found")

    def comment_of(repo: SRepo, comment_id: str, review: bool) -> tuple[SThread, SComment]:
        for thread in repo.threads.values():
            for comment in thread.comments:
                if comment.id == int(comment_id) and comment.review == review:
                    return thread, comment
        raise HttpError(404, "Not Found")

    def get_user(req: Request, m: re.Match[str]) -> Response:
        assert req.user is not None
        created = _ts((world.repos and min(r.created_at for r in world.repos.values())) or None)
        private = {
            "name": req.user.login,
            "company": None,
            "blog": None,
            "location": None,
            "email": None,
            "hireable": None,
            "bio": None,
            "public_repos": 0,
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "created_at": created,
            "updated_at": created,
            "private_gists": 0,
            "total_private_repos": 0,
            "owned_private_repos": 0,
            "disk_usage": 0,
            "collaborators": 0,
            "two_factor_authentication": True,
        }
        return Response(body={**user_json(req.base_url, req.user), **private})

    def get_repo(req: Request, m: re.Match[str]) -> Response:
        return Response(body=repo_json(req.base_url, repo_of(m)))

    def list_issues(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        state = req.query.get("state", "open")
        labels = [x for x in req.query.get("labels", "").split(",") if x]
        since = req.query.get("since")
        assignee = req.query.get("assignee")
        items = []
        for thread in sorted(repo.threads.values(), key=lambda t: -t.number):
            if state != "all" and thread.state != state:
                continue
            if any(label not in thread.labels for label in labels):
                continue
            # Any login filters, an unknown one or an app's `<slug>[bot]` too: 200 with the
            # issues it is assigned (none), not an error (callers in the wild rely on it:
            # `?creator=github-actions%5Bbot%5D` "returns an empty list with status 200" when
            # misspelt; `?assignee=copilot-swe-agent%5Bbot%5D` lists Copilot's issues).
            if assignee and assignee not in [a.login for a in thread.assignees]:
                continue
            if since and (_ts(thread.updated_at) or "") < since:
                continue
            items.append(issue_json(req.base_url, repo, thread))
        return Response(body=items, paginate=True)

    def get_issue(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        return Response(body=issue_json(req.base_url, repo, thread_of(repo, m["number"])))

    def get_pull(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        thread = thread_of(repo, m["number"], ("pull",))
        return Response(body=pull_json(req.base_url, repo, thread, head_repo_of(thread)))

    def list_comments(req: Request, m: re.Match[str], review: bool) -> Response:
        repo = repo_of(m)
        thread = thread_of(repo, m["number"], ("pull",) if review else ("issue", "pull"))
        since = req.query.get("since")
        items = [
            comment_json(req.base_url, repo, thread, c)
            for c in thread.comments
            if c.review == review
            and not c.system
            and (not since or (_ts(c.updated_at) or "") >= since)
        ]
        return Response(body=items, paginate=True)

    def post_comment(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        thread = thread_of(repo, m["number"])
        body = (req.body or {}).get("body")
        if not isinstance(body, str) or not body:
            raise HttpError(422, "Validation Failed")
        assert req.user is not None
        comment = world.add_comment(
            "github", repo.path, thread.number, body, author=req.user.login, kind=thread.kind
        )
        return Response(201, comment_json(req.base_url, repo, thread, comment))

    def edit_comment(req: Request, m: re.Match[str], review: bool) -> Response:
        repo = repo_of(m)
        thread, comment = comment_of(repo, m["id"], review)
        body = (req.body or {}).get("body")
        if not isinstance(body, str) or not body:
            raise HttpError(422, "Validation Failed")
        if req.user is None or req.user.login != comment.author.login:
            raise HttpError(403, "Must have admin rights to Repository.")
        world.edit_comment(comment.id, body)
        return Response(body=comment_json(req.base_url, repo, thread, comment))

    def list_reviews(req: Request, m: re.Match[str]) -> Response:
        # "The list of reviews returns in chronological order" (OpenAPI description); there is
        # no `since` parameter.
        repo = repo_of(m)
        thread = thread_of(repo, m["number"], ("pull",))
        items = [review_json(req.base_url, repo, thread, r) for r in thread.reviews]
        return Response(body=items, paginate=True)

    def review_comments(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        thread = thread_of(repo, m["number"], ("pull",))
        if not any(r.id == int(m["review"]) for r in thread.reviews):
            raise HttpError(404, "Not Found")
        items = [
            comment_json(req.base_url, repo, thread, c)
            for c in thread.comments
            if c.review and c.review_id == int(m["review"])
        ]
        return Response(body=items, paginate=True)

    def get_review_comment(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        thread, comment = comment_of(repo, m["id"], True)
        return Response(body=comment_json(req.base_url, repo, thread, comment))

    def reply(req: Request, m: re.Match[str]) -> Response:
        # "This must be the ID of a top-level review comment, not a reply to that comment.
        # Replies to replies are not supported."
        # https://docs.github.com/rest/pulls/comments#create-a-reply-for-a-review-comment
        repo = repo_of(m)
        thread = thread_of(repo, m["number"], ("pull",))
        target = next(
            (c for c in thread.comments if c.review and c.id == int(m["id"])),
            None,
        )
        if target is None:
            raise HttpError(404, "Not Found")
        if target.in_reply_to is not None:
            raise HttpError(422, "Validation Failed: in_reply_to_id is a reply")
        body = (req.body or {}).get("body")
        if not isinstance(body, str) or not body:
            raise HttpError(422, "Validation Failed")
        assert req.user is not None
        comment = world.reply(
            "github", repo.path, thread.number, target.id, body, author=req.user.login, kind="pull"
        )
        return Response(201, comment_json(req.base_url, repo, thread, comment))

    def add_labels(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        thread = thread_of(repo, m["number"])
        labels = (req.body or {}).get("labels")
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise HttpError(422, "Validation Failed")
        assert req.user is not None
        world.set_labels(
            "github", repo.path, thread.number, thread.labels + labels, thread.kind, req.user.login
        )
        return Response(body=[label_json(req.base_url, repo, n) for n in thread.labels])

    def remove_label(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        thread = thread_of(repo, m["number"])
        name = unquote(m["label"])
        if name not in thread.labels:
            raise HttpError(404, "Label does not exist")
        remaining = [x for x in thread.labels if x != name]
        assert req.user is not None
        world.set_labels("github", repo.path, thread.number, remaining, thread.kind, req.user.login)
        return Response(body=[label_json(req.base_url, repo, n) for n in thread.labels])

    def permission(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        login = unquote(m["user"])
        if login not in world.users:
            raise HttpError(404, "Not Found")
        role = repo.roles.get(login, "read")
        legacy = {"maintain": "write", "triage": "read", "none": "none"}.get(role, role)
        user = {**user_json(req.base_url, world.users[login]), "role_name": role}
        return Response(body={"permission": legacy, "role_name": role, "user": user})

    def contents(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        ref = req.query.get("ref") or repo.default_branch
        path = unquote(m["path"])
        files = repo.files(ref)
        if files is None or path not in files:
            raise HttpError(404, "Not Found")
        data = files[path]
        url = f"{req.base_url}/repos/{repo.path}/contents/{path}?ref={ref}"
        return Response(
            body={
                "type": "file",
                "encoding": "base64",
                "size": len(data),
                "name": path.rsplit("/", 1)[-1],
                "path": path,
                "content": base64.b64encode(data).decode(),
                "sha": hashlib.sha1(data).hexdigest(),
                "url": url,
                "git_url": None,
                "html_url": None,
                "download_url": None,
                "_links": {"self": url, "git": None, "html": None},
            }
        )

    def commit_json(req: Request, repo: SRepo, commit: SCommit) -> dict[str, Any]:
        url = f"{req.base_url}/repos/{repo.path}/git/commits/{commit.sha}"
        return {
            "sha": commit.sha,
            "node_id": f"C_{commit.sha[:12]}",
            "url": url,
            "html_url": f"{req.base_url}/{repo.path}/commit/{commit.sha}",
            "message": commit.message,
            "tree": {
                "sha": commit.tree,
                "url": f"{req.base_url}/repos/{repo.path}/git/trees/{commit.tree}",
            },
            "parents": [
                {"sha": p, "url": f"{req.base_url}/repos/{repo.path}/git/commits/{p}"}
                for p in commit.parents
            ],
            "author": {
                "name": commit.author,
                "email": f"{commit.author}@example.com",
                "date": _ts(repo.created_at),
            },
            "committer": {
                "name": commit.author,
                "email": f"{commit.author}@example.com",
                "date": _ts(repo.created_at),
            },
            "verification": {
                "verified": False,
                "reason": "unsigned",
                "signature": None,
                "payload": None,
                "verified_at": None,
            },
        }

    def ref_json(req: Request, repo: SRepo, branch: str) -> dict[str, Any]:
        sha = repo.branches[branch]
        return {
            "ref": f"refs/heads/{branch}",
            "node_id": f"REF_{branch}",
            "url": f"{req.base_url}/repos/{repo.path}/git/refs/heads/{branch}",
            "object": {
                "type": "commit",
                "sha": sha,
                "url": f"{req.base_url}/repos/{repo.path}/git/commits/{sha}",
            },
        }

    def tarball_link(req: Request, m: re.Match[str]) -> Response:
        # github.com: 302 to codeload.github.com (another host); GHES: to /_codeload/ on its
        # own host. Either way the link carries its own short-lived token.
        repo = repo_of(m)
        commit = repo.resolve(unquote(m["ref"]))
        if commit is None:
            raise HttpError(404, "Not Found")
        link = f"/{repo.path}/legacy.tar.gz/{commit.sha}?token={server.archive_links.issue()}"
        if server.archive_host == "same":
            location = f"{req.base_url}/_codeload{link}"
        else:
            location = f"{server.codeload_url}{link}"
        return Response(302, None, {"Location": location})

    def ghes_codeload(req: Request, m: re.Match[str]) -> Response:
        if server.archive_host != "same":  # github.com serves archives from another host only
            raise HttpError(404, "Not Found")
        repo = repo_of(m)
        commit = repo.resolve(m["sha"])
        if commit is None:
            raise HttpError(404, "Not Found")
        return archive_response(repo, commit, f"{repo.path.replace('/', '-')}-{commit.sha[:7]}")

    def get_ref(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        branch = unquote(m["branch"])
        if not repo.commits:
            # https://docs.github.com/en/rest/git/refs#get-a-reference lists 409 Conflict:
            # the git database API of an empty repository answers "Git Repository is empty."
            raise HttpError(409, "Git Repository is empty.")
        if branch not in repo.branches:
            raise HttpError(404, "Not Found")
        return Response(body=ref_json(req, repo, branch))

    def get_commit(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        commit = repo.commits.get(m["sha"])
        if commit is None:
            raise HttpError(404, "Not Found")
        return Response(body=commit_json(req, repo, commit))

    def get_tree(req: Request, m: re.Match[str]) -> Response:
        # "Get a tree" (not recursive): the entries directly in it, blobs with their mode
        # (100644, 100755, 120000) and git object id, subdirectories as trees to follow.
        # https://docs.github.com/rest/git/trees#get-a-tree
        repo = repo_of(m)
        root, prefix = repo.subtrees.get(m["sha"], (m["sha"], ""))
        files = repo.trees.get(root)
        if files is None:
            raise HttpError(404, "Not Found")
        base = f"{req.base_url}/repos/{repo.path}/git"
        entries: list[dict[str, Any]] = []
        for name, (mode, data) in listing(files, repo.tree_modes.get(root, {}), prefix).items():
            if data is None:
                sub = hashlib.sha1(f"{root}:{prefix}{name}/".encode()).hexdigest()
                repo.subtrees[sub] = (root, f"{prefix}{name}/")
                entry = {"path": name, "mode": mode, "type": "tree", "sha": sub}
                entries.append({**entry, "url": f"{base}/trees/{sub}"})
            else:
                oid = blob_sha(data)
                entry = {"path": name, "mode": mode, "type": "blob", "sha": oid}
                entries.append({**entry, "size": len(data), "url": f"{base}/blobs/{oid}"})
        return Response(
            body={
                "sha": m["sha"],
                "url": f"{base}/trees/{m['sha']}",
                "tree": entries,
                "truncated": False,
            }
        )

    def get_blob(req: Request, m: re.Match[str]) -> Response:
        # "Get a blob": base64 content by git object id (a symlink's blob is its target).
        # https://docs.github.com/rest/git/blobs#get-a-blob
        repo = repo_of(m)
        data = repo.blob(m["sha"])
        if data is None:
            raise HttpError(404, "Not Found")
        return Response(
            body={
                "content": base64.b64encode(data).decode(),
                "encoding": "base64",
                "url": f"{req.base_url}/repos/{repo.path}/git/blobs/{m['sha']}",
                "sha": m["sha"],
                "size": len(data),
                "node_id": f"B_{m['sha'][:12]}",
            }
        )

    def create_tree(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        refuse_push(repo, None, req)
        body = req.body or {}
        base_sha = str(body.get("base_tree")) if body.get("base_tree") else None
        base = repo.trees.get(base_sha) if base_sha else {}
        if base is None:
            raise HttpError(422, "base_tree is not a valid tree")
        files = dict(base)
        modes = dict(repo.tree_modes.get(base_sha or "", {}))
        for entry in body.get("tree") or []:
            path, mode = entry.get("path"), entry.get("mode")
            # "Create a tree": mode is one of 100644 (file), 100755 (executable), 040000
            # (subdirectory), 160000 (submodule) or 120000 (symlink, the content is its target).
            # https://docs.github.com/rest/git/trees#create-a-tree (blobs only here)
            if not isinstance(path, str) or entry.get("type", "blob") != "blob":
                raise HttpError(422, "Validation Failed")
            if mode not in (REGULAR, EXECUTABLE, SYMLINK):
                raise HttpError(422, f"Invalid tree info: mode {mode!r}")
            if "content" in entry:
                files[path] = str(entry["content"]).encode()
                modes[path] = mode
            elif entry.get("sha") is None:
                files.pop(path, None)
                modes.pop(path, None)
            else:
                raise HttpError(422, "blob sha is not supported by the sandbox")
        modes = {p: mode for p, mode in modes.items() if mode != REGULAR}
        sha = tree_sha(files, modes)
        repo.trees[sha] = files
        repo.tree_modes[sha] = modes
        return Response(
            201,
            {
                "sha": sha,
                "url": f"{req.base_url}/repos/{repo.path}/git/trees/{sha}",
                "truncated": False,
                "tree": [],
            },
        )

    def create_commit(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        refuse_push(repo, None, req)
        body = req.body or {}
        files = repo.trees.get(str(body.get("tree")))
        parents = body.get("parents") or []
        if files is None or any(p not in repo.commits for p in parents) or not body.get("message"):
            raise HttpError(422, "Validation Failed")
        assert req.user is not None
        modes = repo.tree_modes.get(str(body.get("tree")))
        commit = repo.commit(files, str(body["message"]), list(parents), req.user.login, modes)
        return Response(201, commit_json(req, repo, commit))

    def create_ref(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        body = req.body or {}
        ref, sha = str(body.get("ref", "")), str(body.get("sha", ""))
        if not ref.startswith("refs/heads/") or sha not in repo.commits:
            raise HttpError(422, "Validation Failed")
        branch = ref.removeprefix("refs/heads/")
        _refuse_protected(repo, branch)
        if repo.fork_of is not None and repo.roles.get(req.user.login if req.user else "") is None:
            raise HttpError(404, "Not Found")  # maintainers may push to a request's branch only
        if branch in repo.branches:
            raise HttpError(422, "Reference already exists")
        repo.branches[branch] = sha
        return Response(201, ref_json(req, repo, branch))

    def update_ref(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        branch = unquote(m["branch"])
        sha = str((req.body or {}).get("sha", ""))
        _refuse_protected(repo, branch)
        refuse_push(repo, branch, req)
        if branch not in repo.branches:
            raise HttpError(422, "Reference does not exist")
        if sha not in repo.commits:
            raise HttpError(422, "Object does not exist")
        # "force: ... Leaving this out or setting it to false will make sure you're not
        # overwriting work": a head that is not an ancestor of `sha` (someone pushed) is a 422
        # "Update is not a fast forward". https://docs.github.com/rest/git/refs#update-a-reference
        if not (req.body or {}).get("force") and not repo.is_ancestor(repo.branches[branch], sha):
            raise HttpError(422, "Update is not a fast forward")
        repo.branches[branch] = sha
        world.head_moved(repo, branch)
        return Response(body=ref_json(req, repo, branch))

    def compare(req: Request, m: re.Match[str]) -> Response:
        # "Compare two commits" with `base...head`: the commits of head since the merge base
        # and the files they change (at most 300 listed). `status` is "behind" or "identical"
        # when head is already in base's history.
        # https://docs.github.com/rest/commits/commits#compare-two-commits
        repo = repo_of(m)
        base, head = repo.resolve(unquote(m["base"])), repo.resolve(unquote(m["head"]))
        merge_base = repo.merge_base(unquote(m["base"]), unquote(m["head"]))
        if base is None or head is None or merge_base is None:
            raise HttpError(404, "Not Found")
        ahead = repo.ancestors(head.sha) - repo.ancestors(base.sha)
        behind = repo.ancestors(base.sha) - repo.ancestors(head.sha)
        old, new = repo.commits[merge_base], head
        files = [
            {"filename": path, "status": _file_status(old.files, new.files, path)}
            for path in sorted(set(old.files) | set(new.files))
            if old.files.get(path) != new.files.get(path)
            or old.modes.get(path) != new.modes.get(path)
        ]
        status = "identical" if base.sha == head.sha else "ahead"
        if not ahead and behind:
            status = "behind"
        elif ahead and behind:
            status = "diverged"
        return Response(
            body={
                "url": f"{req.base_url}/repos/{repo.path}/compare/{m['base']}...{m['head']}",
                "status": status,
                "ahead_by": len(ahead),
                "behind_by": len(behind),
                "total_commits": len(ahead),
                "merge_base_commit": {"sha": merge_base},
                "base_commit": {"sha": base.sha},
                "commits": [{"sha": sha} for sha in sorted(ahead)],
                "files": files[:300],
            }
        )

    def head_owner(repo: SRepo, thread: SThread) -> str:
        """`head` filters "by head user or head organization and branch name in the format
        of user:ref-name": a fork's request is its owner's, not the base repository's.
        https://docs.github.com/rest/pulls/pulls#list-pull-requests"""
        fork = head_repo_of(thread)
        return (fork.owner if fork is not None else repo.owner).login

    def list_pulls(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        head = req.query.get("head")
        state = req.query.get("state", "open")
        items = [
            pull_json(req.base_url, repo, t, head_repo_of(t))
            for t in sorted(repo.threads.values(), key=lambda t: -t.number)
            if t.kind == "pull"
            and (state == "all" or t.state == state)
            and (head is None or head == f"{head_owner(repo, t)}:{t.head_ref}")
        ]
        return Response(body=items, paginate=True)

    def create_pull(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        body = req.body or {}
        head, base = str(body.get("head", "")), str(body.get("base", ""))
        head = head.split(":", 1)[-1]
        if head not in repo.branches or base not in repo.branches or not body.get("title"):
            raise HttpError(422, "Validation Failed")
        if any(
            # The same head means the same repository and branch: a fork's request from a
            # branch of that name is another head (`owner:ref`).
            t.kind == "pull" and t.state == "open" and t.head_ref == head and not t.head_repo
            for t in repo.threads.values()
        ):
            raise HttpError(422, f"A pull request already exists for {repo.owner.login}:{head}.")
        if body.get("draft") and not repo.drafts_supported:
            # Private repositories on GitHub Free/Pro: 422 with this message at the top level
            # (reported e.g. in https://github.com/SWE-agent/SWE-agent/issues/179; plans:
            # https://docs.github.com/en/pull-requests/collaborating-with-pull-requests/proposing-changes-to-your-work-with-pull-requests/about-pull-requests#draft-pull-requests).
            raise HttpError(422, "Draft pull requests are not supported in this repository.")
        assert req.user is not None
        change = SChangeRequest(
            str(body["title"]), str(body.get("body") or ""), head, base, bool(body.get("draft"))
        )
        thread = world.open_change_request("github", repo.path, req.user.login, change)
        return Response(201, pull_json(req.base_url, repo, thread, head_repo_of(thread)))

    def list_events(req: Request, m: re.Match[str]) -> Response:
        repo = repo_of(m)
        thread = thread_of(repo, m["number"])
        items = [event_json(req.base_url, repo, thread, e) for e in thread.events]
        return Response(body=items, paginate=True)

    issue = REPO + r"/issues/(?P<number>\d+)"
    pull = REPO + r"/pulls/(?P<number>\d+)"
    table: list[tuple[str, str, Any]] = [
        ("GET", r"/user", get_user),
        ("GET", REPO, get_repo),
        ("GET", REPO + r"/issues", list_issues),
        ("GET", issue, get_issue),
        ("GET", issue + "/comments", lambda r, m: list_comments(r, m, False)),
        ("POST", issue + "/comments", post_comment),
        ("GET", issue + "/events", list_events),
        ("PATCH", REPO + r"/issues/comments/(?P<id>\d+)", lambda r, m: edit_comment(r, m, False)),
        ("POST", issue + "/labels", add_labels),
        ("DELETE", issue + r"/labels/(?P<label>[^/]+)", remove_label),
        ("GET", pull, get_pull),
        ("GET", pull + "/comments", lambda r, m: list_comments(r, m, True)),
        ("POST", pull + r"/comments/(?P<id>\d+)/replies", reply),
        ("GET", pull + "/reviews", list_reviews),
        ("GET", pull + r"/reviews/(?P<review>\d+)/comments", review_comments),
        ("GET", REPO + r"/pulls/comments/(?P<id>\d+)", get_review_comment),
        ("PATCH", REPO + r"/pulls/comments/(?P<id>\d+)", lambda r, m: edit_comment(r, m, True)),
        ("GET", REPO + r"/collaborators/(?P<user>[^/]+)/permission", permission),
        ("GET", REPO + r"/contents/(?P<path>.+)", contents),
        ("GET", REPO + r"/tarball/(?P<ref>.+)", tarball_link),
        (
            "GET",
            r"/_codeload/(?P<owner>[^/]+)/(?P<name>[^/]+)/legacy\.tar\.gz/(?P<sha>[0-9a-f]+)",
            ghes_codeload,
        ),
        ("GET", REPO + r"/git/ref/heads/(?P<branch>.+)", get_ref),
        ("GET", REPO + r"/git/commits/(?P<sha>[0-9a-f]+)", get_commit),
        ("GET", REPO + r"/git/trees/(?P<sha>[0-9a-f]+)", get_tree),
        ("GET", REPO + r"/git/blobs/(?P<sha>[0-9a-f]+)", get_blob),
        ("POST", REPO + r"/git/trees", create_tree),
        ("POST", REPO + r"/git/commits", create_commit),
        ("POST", REPO + r"/git/refs", create_ref),
        ("PATCH", REPO + r"/git/refs/heads/(?P<branch>.+)", update_ref),
        ("GET", REPO + r"/compare/(?P<base>.+?)\.\.\.(?P<head>.+)", compare),
        ("GET", REPO + r"/pulls", list_pulls),
        ("POST", REPO + r"/pulls", create_pull),
    ]

    # An archived repository is read-only: every write is a 403 with this message
    # (https://docs.github.com/en/repositories/archiving-a-github-repository/archiving-repositories).
    message = "Repository was archived so is read-only."
    return read_only_when_archived(table, "owner", lambda m: repo_of(m).archived, message)


def _file_status(old: dict[str, bytes], new: dict[str, bytes], path: str) -> str:
    if path not in old:
        return "added"
    return "removed" if path not in new else "modified"


def _refuse_protected(repo: SRepo, branch: str) -> None:
    # Branch protection refuses ref updates with 422 "Protected branch update failed"
    # (https://docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches).
    if repo.is_protected(branch):
        raise HttpError(422, f"Protected branch update failed for refs/heads/{branch}.")


def codeload_routes(server: ForgeServer) -> list[Route]:
    """The archive host github.com redirects to: `/{owner}/{name}/legacy.tar.gz/{sha}`."""
    world = server.world

    def codeload(req: Request, m: re.Match[str]) -> Response:
        repo = world.repos.get(("github", f"{m['owner']}/{m['name']}"))
        commit = repo.resolve(m["sha"]) if repo is not None else None
        if repo is None or commit is None:
            raise HttpError(404, "Not Found")
        return archive_response(repo, commit, f"{repo.path.replace('/', '-')}-{commit.sha[:7]}")

    pattern = r"/(?P<owner>[^/]+)/(?P<name>[^/]+)/legacy\.tar\.gz/(?P<sha>[0-9a-f]+)"
    return [Route("GET", re.compile(pattern), codeload)]
