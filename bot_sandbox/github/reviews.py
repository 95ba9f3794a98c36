"""A pull request's reviews, and the line comments of one review."""

from __future__ import annotations

import re
from typing import Any

from bot_sandbox.github.lookup import REPO, repo_of, thread_of
from bot_sandbox.github.shapes import association, timestamp, user_json
from bot_sandbox.github.thread_shapes import comment_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response
from bot_sandbox.site import Site
from bot_sandbox.world import SRepo, SReview, SThread

PULL = REPO + r"/pulls/(?P<number>\d+)"


def list_reviews(site: Site, req: Request, m: re.Match[str]) -> Response:
    # "The list of reviews returns in chronological order" (OpenAPI description); there is
    # no `since` parameter.
    repo = repo_of(site.world, m)
    thread = thread_of(repo, m["number"], ("pull",))
    items = [_review_json(req.base_url, repo, thread, r) for r in thread.reviews]
    return Response(body=items, paginate=True)


def review_comments(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    thread = thread_of(repo, m["number"], ("pull",))
    if not any(r.id == int(m["review"]) for r in thread.reviews):
        raise HttpError(404, "Not Found")
    items = [
        comment_json(req.base_url, repo, thread, c)
        for c in thread.comments
        if c.review and c.review_id == int(m["review"])
    ]
    return Response(body=items, paginate=True)


def _review_json(base: str, repo: SRepo, thread: SThread, review: SReview) -> dict[str, Any]:
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
        "submitted_at": timestamp(review.submitted_at),
        "commit_id": review.commit_id,
        "author_association": association(repo, review.author),
    }


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", PULL + "/reviews", list_reviews),
    Endpoint("GET", PULL + r"/reviews/(?P<review>\d+)/comments", review_comments),
]
