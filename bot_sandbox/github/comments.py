"""Comments on issues and pull requests, and review comments on a pull request's lines."""

from __future__ import annotations

import re
from functools import partial

from bot_sandbox.github.lookup import REPO, repo_of, thread_of
from bot_sandbox.github.shapes import timestamp
from bot_sandbox.github.thread_shapes import comment_json
from bot_sandbox.http import Endpoint, HttpError, Request, Response, body_text
from bot_sandbox.site import Site
from bot_sandbox.world import SComment, SRepo, SThread

ISSUE = REPO + r"/issues/(?P<number>\d+)"
PULL = REPO + r"/pulls/(?P<number>\d+)"
# 422 "body is too long (maximum is 65536 characters)": docs.github.com/rest/issues/comments,
# as real repositories see it (danger/danger#424, googleapis/release-please#1034).
COMMENT_CHARS = 65_536
TOO_LONG = "Validation Failed: body is too long (maximum is 65536 characters)"


def list_comments(site: Site, req: Request, m: re.Match[str], *, review: bool) -> Response:
    repo = repo_of(site.world, m)
    thread = thread_of(repo, m["number"], ("pull",) if review else ("issue", "pull"))
    since = req.query.get("since")
    items = [
        comment_json(req.base_url, repo, thread, c)
        for c in thread.comments
        if c.review == review
        and not c.system
        and (not since or (timestamp(c.updated_at) or "") >= since)
    ]
    return Response(body=items, paginate=True)


def post_comment(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    thread = thread_of(repo, m["number"])
    body = body_text(req, 422, "Validation Failed", COMMENT_CHARS, TOO_LONG)
    assert req.user is not None
    comment = site.world.add_comment(
        "github", repo.path, thread.number, body, author=req.user.login, kind=thread.kind
    )
    return Response(201, comment_json(req.base_url, repo, thread, comment))


def edit_comment(site: Site, req: Request, m: re.Match[str], *, review: bool) -> Response:
    repo = repo_of(site.world, m)
    thread, comment = _comment_of(repo, m["id"], review)
    body = body_text(req, 422, "Validation Failed", COMMENT_CHARS, TOO_LONG)
    if req.user is None or req.user.login != comment.author.login:
        raise HttpError(403, "Must have admin rights to Repository.")
    site.world.edit_comment(comment.id, body)
    return Response(body=comment_json(req.base_url, repo, thread, comment))


def get_review_comment(site: Site, req: Request, m: re.Match[str]) -> Response:
    repo = repo_of(site.world, m)
    thread, comment = _comment_of(repo, m["id"], True)
    return Response(body=comment_json(req.base_url, repo, thread, comment))


def reply(site: Site, req: Request, m: re.Match[str]) -> Response:
    # "This must be the ID of a top-level review comment, not a reply to that comment.
    # Replies to replies are not supported."
    # https://docs.github.com/rest/pulls/comments#create-a-reply-for-a-review-comment
    repo = repo_of(site.world, m)
    thread = thread_of(repo, m["number"], ("pull",))
    target = next(
        (c for c in thread.comments if c.review and c.id == int(m["id"])),
        None,
    )
    if target is None:
        raise HttpError(404, "Not Found")
    if target.in_reply_to is not None:
        raise HttpError(422, "Validation Failed: in_reply_to_id is a reply")
    body = body_text(req, 422, "Validation Failed", COMMENT_CHARS, TOO_LONG)
    assert req.user is not None
    comment = site.world.reply(
        "github", repo.path, thread.number, target.id, body, author=req.user.login, kind="pull"
    )
    return Response(201, comment_json(req.base_url, repo, thread, comment))


def _comment_of(repo: SRepo, comment_id: str, review: bool) -> tuple[SThread, SComment]:
    for thread in repo.threads.values():
        for comment in thread.comments:
            if comment.id == int(comment_id) and comment.review == review:
                return thread, comment
    raise HttpError(404, "Not Found")


ENDPOINTS: list[Endpoint[Site]] = [
    Endpoint("GET", ISSUE + "/comments", partial(list_comments, review=False)),
    Endpoint("POST", ISSUE + "/comments", post_comment),
    Endpoint("PATCH", REPO + r"/issues/comments/(?P<id>\d+)", partial(edit_comment, review=False)),
]
REVIEW_COMMENTS: list[Endpoint[Site]] = [
    Endpoint("GET", PULL + "/comments", partial(list_comments, review=True)),
    Endpoint("POST", PULL + r"/comments/(?P<id>\d+)/replies", reply),
    Endpoint("GET", REPO + r"/pulls/comments/(?P<id>\d+)", get_review_comment),
    Endpoint("PATCH", REPO + r"/pulls/comments/(?P<id>\d+)", partial(edit_comment, review=True)),
]
