"""Which thread a delivery is about (or None: an event the bot does not act on).

GitHub: `X-GitHub-Event` names the event; issues, issue comments (also on pull requests, where
`issue.pull_request` is present), pull requests, reviews and review comments carry the repository
and the number (docs.github.com/webhooks/webhook-events-and-payloads). GitLab: `object_kind`
issue, merge_request and note (whose `noteable_type` says Issue or MergeRequest), with
`project.path_with_namespace` and the thread's `iid`.
"""

from __future__ import annotations

from typing import Any

from bot.model.thread import Kind, Platform, TaskKey

GITHUB_EVENTS = {
    "issues",
    "issue_comment",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "pull_request_review_thread",
}


def thread_of(platform: Platform, event: str, payload: Any) -> TaskKey | None:
    if not isinstance(payload, dict):
        return None
    try:
        if platform is Platform.GITHUB:
            return _github(event, payload)
        return _gitlab(payload)
    except (KeyError, TypeError, ValueError):
        return None  # a payload of another shape: nothing to check


def _github(event: str, payload: dict[str, Any]) -> TaskKey | None:
    if event not in GITHUB_EVENTS:
        return None
    repo = str(payload["repository"]["full_name"])
    if event == "issues":
        return TaskKey(Platform.GITHUB, repo, Kind.ISSUE, int(payload["issue"]["number"]))
    if event == "issue_comment":
        issue = payload["issue"]
        kind = Kind.PULL if issue.get("pull_request") is not None else Kind.ISSUE
        return TaskKey(Platform.GITHUB, repo, kind, int(issue["number"]))
    return TaskKey(Platform.GITHUB, repo, Kind.PULL, int(payload["pull_request"]["number"]))


def _gitlab(payload: dict[str, Any]) -> TaskKey | None:
    kind_name = payload.get("object_kind")
    repo = str(payload["project"]["path_with_namespace"])
    if kind_name == "issue":
        return TaskKey(Platform.GITLAB, repo, Kind.ISSUE, int(payload["object_attributes"]["iid"]))
    if kind_name == "merge_request":
        iid = int(payload["object_attributes"]["iid"])
        return TaskKey(Platform.GITLAB, repo, Kind.MERGE_REQUEST, iid)
    if kind_name == "note":
        noteable = payload["object_attributes"].get("noteable_type")
        if noteable == "Issue":
            return TaskKey(Platform.GITLAB, repo, Kind.ISSUE, int(payload["issue"]["iid"]))
        if noteable == "MergeRequest":
            iid = int(payload["merge_request"]["iid"])
            return TaskKey(Platform.GITLAB, repo, Kind.MERGE_REQUEST, iid)
    return None
