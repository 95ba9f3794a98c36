"""The emulator's GitHub bodies validate against GitHub's OpenAPI description.

Schemas come from `fixtures/openapi/github_subset.json`, produced by the `extract.py` beside it
from the npm package `@octokit/openapi`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import requests

from bot_sandbox.forge_server import ForgeServer
from tests.conftest import BOT_TOKEN, REPO

SCHEMAS: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "openapi" / "github_subset.json").read_text()
)["schemas"]


@pytest.fixture
def seeded(server: ForgeServer) -> ForgeServer:
    w = server.world
    issue = w.add_thread(
        "github", REPO, title="Issue", body="text", labels=["coding agent"], assignees=["alice"]
    )
    pull = w.add_thread("github", REPO, kind="pull", title="PR", body=None or "", head_ref="fix")
    w.add_comment("github", REPO, issue.number, "hello", author="alice")
    w.add_comment("github", REPO, pull.number, "@coding-bot a look?", author="alice")  # notified
    w.set_labels("github", REPO, issue.number, ["coding agent", "x"], actor="carol")  # labeled
    w.set_labels("github", REPO, issue.number, ["coding agent"], actor="carol")  # unlabeled
    w.assign("github", REPO, issue.number, "coding-bot", actor="carol")
    w.add_comment("github", REPO, pull.number, "on a line", author="alice", review=True)
    w.push("github", REPO, "fix", {"src/app.py": "print('hello')\n"}, "greet")
    w.thread("github", REPO, pull.number).head_sha = w.repo("github", REPO).branches["fix"]
    w.add_review(
        REPO,
        pull.number,
        "Request changes: rename foo",
        comments=[("src/app.py", 1, "say hello to whom?")],
    )
    w.add_review(REPO, pull.number, "", state="APPROVED", author="carol")
    return server


def call(server: ForgeServer, method: str, path: str, **kwargs: Any) -> requests.Response:
    headers = {"Authorization": f"token {BOT_TOKEN}"}
    response = requests.request(method, server.url + path, headers=headers, timeout=5, **kwargs)
    assert response.status_code < 300, (path, response.status_code, response.text)
    return response


def comment_id(server: ForgeServer, number: int) -> int:
    return server.world.thread("github", REPO, number).comments[0].id


CASES = [
    ("GET", "/user", "GET /user 200", {}),
    ("GET", f"/repos/{REPO}", "GET /repos/{owner}/{repo} 200", {}),
    ("GET", f"/repos/{REPO}/issues?state=all", "GET /repos/{owner}/{repo}/issues 200", {}),
    ("GET", f"/repos/{REPO}/issues/1", "GET /repos/{owner}/{repo}/issues/{issue_number} 200", {}),
    ("GET", f"/repos/{REPO}/issues/2", "GET /repos/{owner}/{repo}/issues/{issue_number} 200", {}),
    (
        "GET",
        f"/repos/{REPO}/issues/1/comments",
        "GET /repos/{owner}/{repo}/issues/{issue_number}/comments 200",
        {},
    ),
    (
        "GET",
        f"/repos/{REPO}/issues/1/events",
        "GET /repos/{owner}/{repo}/issues/{issue_number}/events 200",
        {},
    ),
    (
        "POST",
        f"/repos/{REPO}/issues/1/comments",
        "POST /repos/{owner}/{repo}/issues/{issue_number}/comments 201",
        {"json": {"body": "new"}},
    ),
    (
        "POST",
        f"/repos/{REPO}/issues/1/labels",
        "POST /repos/{owner}/{repo}/issues/{issue_number}/labels 200",
        {"json": {"labels": ["x"]}},
    ),
    (
        "DELETE",
        f"/repos/{REPO}/issues/1/labels/coding%20agent",
        "DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name} 200",
        {},
    ),
    ("GET", f"/repos/{REPO}/pulls/2", "GET /repos/{owner}/{repo}/pulls/{pull_number} 200", {}),
    (
        "GET",
        f"/repos/{REPO}/pulls/2/reviews",
        "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews 200",
        {},
    ),
    (
        "GET",
        f"/repos/{REPO}/pulls/2/comments",
        "GET /repos/{owner}/{repo}/pulls/{pull_number}/comments 200",
        {},
    ),
    (
        "GET",
        f"/repos/{REPO}/collaborators/alice/permission",
        "GET /repos/{owner}/{repo}/collaborators/{username}/permission 200",
        {},
    ),
    (
        "GET",
        f"/repos/{REPO}/contents/src/app.py?ref=main",
        "GET /repos/{owner}/{repo}/contents/{path} 200",
        {},
    ),
    ("GET", "/notifications?all=true", "GET /notifications 200", {}),
]


@pytest.mark.parametrize(("method", "path", "schema", "kwargs"), CASES, ids=[c[2] for c in CASES])
def test_github_bodies_match_openapi(
    seeded: ForgeServer, method: str, path: str, schema: str, kwargs: dict[str, Any]
) -> None:
    body = call(seeded, method, path, **kwargs).json()
    jsonschema.validate(body, SCHEMAS[schema])


@pytest.mark.parametrize("review", [False, True])
def test_comment_edits_match_openapi(seeded: ForgeServer, review: bool) -> None:
    # The bot may edit only its own comments, as on GitHub.
    number = 2 if review else 1
    seeded.world.add_comment("github", REPO, number, "mine", author="coding-bot", review=review)
    own = seeded.world.thread("github", REPO, number).comments[-1].id
    section = "pulls" if review else "issues"
    body = call(
        seeded, "PATCH", f"/repos/{REPO}/{section}/comments/{own}", json={"body": "edited"}
    ).json()
    jsonschema.validate(
        body, SCHEMAS[f"PATCH /repos/{{owner}}/{{repo}}/{section}/comments/{{comment_id}} 200"]
    )


def test_review_comment_and_reply_match_openapi(seeded: ForgeServer) -> None:
    thread = seeded.world.thread("github", REPO, 2)
    positioned = next(c for c in thread.comments if c.position is not None)
    single = call(seeded, "GET", f"/repos/{REPO}/pulls/comments/{positioned.id}").json()
    jsonschema.validate(
        single, SCHEMAS["GET /repos/{owner}/{repo}/pulls/comments/{comment_id} 200"]
    )
    assert (single["path"], single["line"], single["side"]) == ("src/app.py", 1, "RIGHT")
    assert single["diff_hunk"].endswith("+print('hello')")  # the hunk up to the line
    reply = call(
        seeded,
        "POST",
        f"/repos/{REPO}/pulls/2/comments/{positioned.id}/replies",
        json={"body": "to the world"},
    ).json()
    jsonschema.validate(
        reply,
        SCHEMAS["POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies 201"],
    )
    assert reply["in_reply_to_id"] == positioned.id and reply["path"] == "src/app.py"


def test_a_reviews_comments_match_openapi(seeded: ForgeServer) -> None:
    review = seeded.world.thread("github", REPO, 2).reviews[0]
    body = call(seeded, "GET", f"/repos/{REPO}/pulls/2/reviews/{review.id}/comments").json()
    jsonschema.validate(
        body,
        SCHEMAS["GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/comments 200"],
    )
    assert [c["body"] for c in body] == ["say hello to whom?"]


def test_notifications_match_openapi_read_or_not(seeded: ForgeServer) -> None:
    (unread,) = call(seeded, "GET", "/notifications").json()
    assert unread["reason"] == "mention" and unread["last_read_at"] is None
    call(seeded, "PATCH", f"/notifications/threads/{unread['id']}")
    assert call(seeded, "GET", "/notifications").json() == []
    (read,) = call(seeded, "GET", "/notifications?all=true").json()
    jsonschema.validate([read], SCHEMAS["GET /notifications 200"])
    assert read["unread"] is False and read["last_read_at"] is not None


def test_reply_to_a_reply_is_refused(seeded: ForgeServer) -> None:
    # GitHub: "Replies to replies are not supported."
    thread = seeded.world.thread("github", REPO, 2)
    positioned = next(c for c in thread.comments if c.position is not None)
    first = seeded.world.reply("github", REPO, 2, positioned.id, "first", kind="pull")
    headers = {"Authorization": f"token {BOT_TOKEN}"}
    response = requests.post(
        f"{seeded.url}/repos/{REPO}/pulls/2/comments/{first.id}/replies",
        json={"body": "nested"},
        headers=headers,
        timeout=5,
    )
    assert response.status_code == 422


def test_every_extracted_schema_is_exercised() -> None:
    covered = {c[2] for c in CASES} | {
        "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id} 200",
        "PATCH /repos/{owner}/{repo}/pulls/comments/{comment_id} 200",
        "GET /repos/{owner}/{repo}/pulls/comments/{comment_id} 200",
        "POST /repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies 201",
        "GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/comments 200",
    }
    assert covered == set(SCHEMAS)


def test_schema_check_rejects_a_wrong_body() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"login": "x"}, SCHEMAS["GET /repos/{owner}/{repo}/issues/{issue_number} 200"]
        )
