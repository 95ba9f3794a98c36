"""How long a comment may be on each forge; a longer one is refused, never cut by the forge.

GitHub answers 422 "body is too long (maximum is 65536 characters)" for an issue or pull request
comment (https://docs.github.com/rest/issues/comments#create-an-issue-comment; the message as
real repositories see it: danger/danger#424, googleapis/release-please#1034). GitLab refuses a
note over `Gitlab::Database::MAX_TEXT_SIZE_LIMIT` (1,000,000 characters, lib/gitlab/database.rb,
gitlab-foss#61974) with 400. Both count characters (Ruby's String#length: code points).
A pull request's body has GitHub's comment limit; a merge request's description may have a
megabyte (`DESCRIPTION_LENGTH_MAX`, doc/development/issuable-like-models.md).
"""

from __future__ import annotations

from bot.model.thread import Platform

COMMENT_CHARS: dict[Platform, int] = {Platform.GITHUB: 65_536, Platform.GITLAB: 1_000_000}
REQUEST_BODY_CHARS: dict[Platform, int] = {Platform.GITHUB: 65_536, Platform.GITLAB: 1_048_576}


def comment_chars(platform: Platform) -> int:
    return COMMENT_CHARS[Platform(platform)]


def request_body_chars(platform: Platform) -> int:
    return REQUEST_BODY_CHARS[Platform(platform)]


def fit(text: str, tag: str, limit: int) -> str:
    """`text` and `tag` (a marker, or "") as one text of at most `limit` characters. A longer
    text keeps its beginning and says how much was left out; a code fence left open by the cut
    is closed, so the note and the marker are not swallowed into it."""
    whole = f"{text}\n\n{tag}" if tag else text
    if len(whole) <= limit:
        return whole
    # The note's figure is at most len(text); "\n~~~" closes a fence; "\n\n" twice.
    room = limit - len(tag) - len(_note(len(text), limit)) - len("\n~~~") - 4
    kept = text[: max(room, 0)]
    fence = _open_fence(kept)
    closing = f"\n{fence}" if fence else ""
    cut = f"{kept}{closing}\n\n{_note(len(text) - len(kept), limit)}"
    return f"{cut}\n\n{tag}" if tag else cut


def _note(left_out: int, limit: int) -> str:
    return f"*(cut: {left_out:,} more characters did not fit: the forge takes {limit:,})*"


def _open_fence(text: str) -> str:
    """The fence that opens a code block `text` does not close, or ""."""
    opened = ""
    for line in text.splitlines():
        stripped = line.lstrip()
        mark = stripped[:3]
        if mark not in ("```", "~~~"):
            continue
        if not opened:
            opened = mark
        elif mark == opened and not stripped.strip("`~").strip():
            opened = ""
    return opened
