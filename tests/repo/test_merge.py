"""The per-file three-way merge publishing uses when a person pushed since the pin."""

from __future__ import annotations

import pytest

from bot.repo.merge import Conflict, merge_file, merge_text

BASE = "import sys\n\n\ndef main():\n    print('hi')\n"


def test_changes_to_different_lines_combine() -> None:
    ours = BASE.replace("'hi'", "'hello'")
    theirs = "import os\n" + BASE
    assert merge_text(BASE, ours, theirs) == "import os\n" + ours


def test_the_same_line_changed_differently_conflicts() -> None:
    with pytest.raises(Conflict):
        merge_text(BASE, BASE.replace("'hi'", "'hello'"), BASE.replace("'hi'", "'hey'"))


def test_adjacent_changes_conflict_as_in_git() -> None:
    base = "a\nb\nc\n"
    with pytest.raises(Conflict):
        merge_text(base, "a\nB\nc\n", "a\nb\nC\n")


def test_the_same_change_on_both_sides_is_taken_once() -> None:
    imports = BASE.replace("import sys", "import re, sys")
    theirs = imports.replace("'hi'", "'hey'")
    assert merge_text(BASE, imports, theirs) == theirs


def test_whole_file_cases() -> None:
    base, ours, theirs = b"a\n", b"b\n", b"c\n"
    assert merge_file(base, ours, base) == ours  # only we changed it
    assert merge_file(base, base, theirs) == theirs  # only they did
    assert merge_file(None, ours, None) == ours  # a new file
    assert merge_file(base, None, base) is None  # our delete
    assert merge_file(base, None, None) is None  # deleted on both sides
    for args in ((base, ours, None), (base, None, theirs), (None, ours, theirs)):
        with pytest.raises(Conflict):
            merge_file(*args)  # changed on one side and deleted or added on the other
    with pytest.raises(Conflict):
        merge_file(b"\xff\x00", b"\xfe\x00", b"\xfd\x00")  # binary changed on both sides
