"""GitHub's JSON for users, repositories and labels, the building blocks of every other body.

Bodies follow GitHub's OpenAPI description (@octokit/openapi);
`tests/sandbox/test_emulator_openapi.py` validates them against the schemas extracted from it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot_sandbox.world import ROLES, SRepo, SUser


def timestamp(value: datetime | None) -> str | None:
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
        "pushed_at": timestamp(repo.created_at),
        "created_at": timestamp(repo.created_at),
        "updated_at": timestamp(repo.created_at),
        "network_count": 0,
        "subscribers_count": 0,
    }


def association(repo: SRepo, user: SUser) -> str:
    if user.login == repo.owner.login:
        return "OWNER"
    role = repo.roles.get(user.login, "none")
    return "COLLABORATOR" if ROLES.index(role) >= ROLES.index("write") else "NONE"
