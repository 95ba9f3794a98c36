"""A post longer than the forge takes is cut to fit, says so, and keeps its marker last.

GitHub refuses a comment over 65,536 characters with 422 and GitLab a note over 1,000,000 with
400 (bot/forge/limits.py); a final answer with a long report, or a long answer of the model,
would otherwise never be posted and the task would retry it forever.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.forge.errors import ForgeError
from bot.forge.limits import comment_chars
from bot.model.state import PendingPost, TaskState
from bot.model.thread import Platform, TaskKey
from bot.store.task_files import StateStore
from bot.task.posting import Poster, fit, marker
from bot_sandbox.forge_server import ForgeServer
from tests.conftest import REPO, ForgeFactory


def _poster(
    server: ForgeServer, platform: str, make_forge: ForgeFactory, tmp_path: Path, body: str
) -> tuple[Poster, TaskKey, int]:
    thread = server.world.add_thread(platform, REPO)
    key = TaskKey.parse(f"{platform}:{REPO}#{thread.number}")
    state = TaskState(
        key=str(key), next_seq=2, pending_post=PendingPost(seq=1, purpose="final", body=body)
    )
    return Poster(make_forge(), key, "coding-bot", StateStore(tmp_path), state), key, thread.number


def _bot_bodies(server: ForgeServer, platform: str, number: int) -> list[str]:
    thread = server.world.thread(platform, REPO, number)
    return [c.body for c in thread.comments if c.author.login == "coding-bot"]


def test_the_emulator_refuses_what_the_forge_refuses(
    server: ForgeServer, platform: str, make_forge: ForgeFactory
) -> None:
    thread = server.world.add_thread(platform, REPO)
    key = TaskKey.parse(f"{platform}:{REPO}#{thread.number}")
    limit = comment_chars(Platform(platform))
    forge = make_forge()
    with pytest.raises(ForgeError):
        forge.post_comment(key, "x" * (limit + 1))
    assert forge.post_comment(key, "x" * limit).body == "x" * limit


def test_a_final_answer_over_the_limit_is_cut_and_posted_with_its_marker(
    server: ForgeServer, platform: str, make_forge: ForgeFactory, tmp_path: Path
) -> None:
    limit = comment_chars(Platform(platform))
    body = "The answer.\n\n" + "word " * (limit // 5 + 100)
    poster, key, number = _poster(server, platform, make_forge, tmp_path, body)
    poster.deliver(look_up=False)
    (posted,) = _bot_bodies(server, platform, number)
    assert len(posted) <= limit
    assert posted.startswith("The answer.")
    assert posted.endswith(marker(key, 1))
    assert f"more characters did not fit: the forge takes {limit:,}" in posted
    # After a crash the look-up finds the cut post by its marker: it is not posted twice.
    poster.state.pending_post = PendingPost(seq=1, purpose="final", body=body)
    poster.deliver(look_up=True)
    assert len(_bot_bodies(server, platform, number)) == 1


def test_a_post_that_fits_is_posted_whole(
    server: ForgeServer, platform: str, make_forge: ForgeFactory, tmp_path: Path
) -> None:
    body = "y" * 70_000  # over GitHub's limit, well under GitLab's
    poster, key, number = _poster(server, platform, make_forge, tmp_path, body)
    poster.deliver(look_up=False)
    (posted,) = _bot_bodies(server, platform, number)
    if platform == "gitlab":
        assert posted == f"{body}\n\n{marker(key, 1)}"
    else:
        assert len(posted) <= 65_536 and posted.endswith(marker(key, 1))


def test_the_progress_comment_is_cut_when_edited_too(
    server: ForgeServer, platform: str, make_forge: ForgeFactory, tmp_path: Path
) -> None:
    poster, key, number = _poster(server, platform, make_forge, tmp_path, "short")
    poster.state.pending_post = None
    poster.show("- [ ] plan", "call-1")
    limit = comment_chars(Platform(platform))
    poster.show("- [ ] step\n" * (limit // 10), "call-2")
    (posted,) = _bot_bodies(server, platform, number)
    assert len(posted) <= limit
    assert posted.endswith(marker(key, poster.state.progress_seq or 0))
    assert posted.startswith("- [ ] step")


def test_a_code_block_open_at_the_cut_is_closed_before_the_note() -> None:
    text = "Output:\n\n~~~\n" + "line\n" * 100
    cut = fit(text, "<!-- bot:m -->", 200)
    kept, rest = cut.split("\n\n*(cut:", 1)
    assert kept.endswith("\n~~~")
    assert rest.endswith("<!-- bot:m -->")
    closed = fit("```\ncode\n```\n" + "z" * 300, "<!-- bot:m -->", 200)
    assert "\n```\n\n*(cut:" not in closed  # a closed block gets no second fence


@given(
    text=st.text(st.characters(codec="utf-8"), max_size=600),
    limit=st.integers(min_value=150, max_value=700),
)
def test_fit_never_exceeds_the_limit_and_ends_with_the_marker(text: str, limit: int) -> None:
    tag = "<!-- bot:github:acme/app#1:12 -->"
    fitted = fit(text, tag, limit)
    assert len(fitted) <= limit
    assert fitted.endswith(tag)
    if len(text) + len(tag) + 2 <= limit:
        assert fitted == f"{text}\n\n{tag}"
    else:
        assert fitted.startswith(text[: limit - len(tag) - 200])
