"""Names from outside (a fork's branch, its file paths) shown in code spans they cannot end."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from bot.core.markdown import code_span
from bot.repo.patch import MAX_PATCH_CHARS, patch_section


@given(st.text(st.characters(codec="utf-8"), max_size=80))
def test_a_code_span_is_one_line_that_nothing_inside_can_close(text: str) -> None:
    span = code_span(text)
    fence = re.match(r"`+", span)
    assert fence is not None and span.endswith(fence.group())
    inner = span[len(fence.group()) : -len(fence.group())]
    assert all(len(run) != len(fence.group()) for run in re.findall(r"`+", inner))
    assert "\n" not in span and "\r" not in span


def test_a_branch_with_backticks_stays_in_its_span() -> None:
    assert code_span("x`@victim`y") == "``x`@victim`y``"
    assert code_span("`@victim") == "`` `@victim ``"


def test_a_too_long_patch_lists_its_files_in_spans_they_cannot_end() -> None:
    name = "docs/x`@victim`.md"
    patch = f"--- a/{name}\n+++ b/{name}\n" + "+line\n" * (MAX_PATCH_CHARS // 6 + 1)
    section = patch_section(patch, "the fork does not allow maintainer edits")
    assert f"- {code_span(name)}" in section
    assert "- `docs/x`@victim" not in section
