"""The internal-note filter itself: what counts as a copy of a note, where the replacement goes,
and which files of a changeset carry a note (bot/task/confidential.py)."""

from __future__ import annotations

import string
import unicodedata
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.task.confidential import MIN_RUN, SHORTEST, WITHHELD, carrying_internal, refusal, withhold

NOTE = "Customer ACME pays 40k a year and says they will leave in March"
ZWSP = "\u200b"


def letters(text: str) -> str:
    """The test's own reading of a text: letters and digits after NFKD and case folding, marks
    and invisible characters dropped (written apart from bot/task/confidential.py on purpose)."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    return "".join(c for c in decomposed if c.isalnum() and unicodedata.category(c)[0] != "M")


def carries(text: str, note: str) -> bool:
    """Whether `text` still holds a run of the note as long as the filter looks for."""
    folded, within = letters(note), letters(text)
    size = min(MIN_RUN, len(folded))
    return any(folded[i : i + size] in within for i in range(len(folded) - size + 1))


# -- look-alikes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "copy",
    [
        ZWSP.join(NOTE[i : i + 8] for i in range(0, len(NOTE), 8)),  # the reported bypass
        "\u00ad".join(NOTE),  # a soft hyphen between every two characters
        "\u202e" + "\u2060".join(NOTE.split(" ")) + "\u202c",  # bidi controls, word joiners
        "".join(chr(ord(c) + 0xFEE0) if c != " " else "\u3000" for c in NOTE),  # full width
        NOTE.replace("fi", "\ufb01").replace("a", "\u1d43"),  # superscript a (NFKC: "a")
        "".join(c + "\u0336" for c in NOTE),  # combining strike-through (category Mn)
        "".join(f"&#{ord(c)};" for c in NOTE),  # HTML character references
        NOTE.replace(" ", "&nbsp;").replace("A", "&#x41;"),
        NOTE.replace(" ", "\\_"),  # Markdown escapes
        "<b></b>".join(NOTE[i : i + 5] for i in range(0, len(NOTE), 5)),  # render as nothing
        "<!-- x -->".join(NOTE[i : i + 5] for i in range(0, len(NOTE), 5)),
        f"**{NOTE[:20]}**_{NOTE[20:40]}_`{NOTE[40:]}`",  # emphasis and code
        "\n".join(f"> > {NOTE[i : i + 10]}" for i in range(0, len(NOTE), 10)),  # quoted, wrapped
        "\n".join(f"# {NOTE[i : i + 10]}" for i in range(0, len(NOTE), 10)),  # code comments
        " ".join(f'"{word}"' for word in NOTE.split()),  # string literals
        NOTE.replace(" ", "\u2028\u00a0\t"),  # line separator, no-break space, tab
        NOTE.swapcase().replace("ss", "\u00df"),  # case, and a sharp s
    ],
)
def test_look_alikes_of_a_note_are_withheld(copy: str) -> None:
    text = f"Before.\n{copy}\nAfter."
    out = withhold(text, [NOTE])
    assert out == f"Before.\n{WITHHELD}\nAfter." or (
        out.startswith("Before.\n") and out.endswith("\nAfter.") and WITHHELD in out
    )
    assert not carries(out, NOTE)


def test_a_note_in_an_attribute_or_comment_is_withheld_too() -> None:
    for text in (f'<span title="{NOTE}">hi</span>', f"ok <!-- {NOTE} --> ok"):
        assert not carries(withhold(text, [NOTE]), NOTE)


def test_the_replacement_covers_the_copy_exactly() -> None:
    copy = ZWSP.join(NOTE[i : i + 8] for i in range(0, len(NOTE), 8))
    assert withhold(f"As said: {copy}. Thanks!", [NOTE]) == f"As said: {WITHHELD}. Thanks!"
    # Marks after the last letter go with it; the space after it stays.
    marked = "".join(c + "\u0301" for c in NOTE)
    assert withhold(f"x {marked} y", [NOTE]) == f"x {WITHHELD} y"
    # A part of the note long enough is a quote; what is around it stays.
    assert withhold(f"so {NOTE[9:40]}!", [NOTE]) == f"so {WITHHELD}!"


def test_withholding_twice_changes_nothing_more() -> None:
    once = withhold(f"a {NOTE} b {NOTE.upper()} c", [NOTE])
    assert once == f"a {WITHHELD} b {WITHHELD} c"
    assert withhold(once, [NOTE]) == once


def test_ordinary_text_and_short_notes_are_left_alone() -> None:
    text = "Fixed the greeting in src/app.py; pays off later. Customer: ACME, ok?"
    assert withhold(text, [NOTE[:20], "ok, thanks", "pays 40k"]) == text
    assert withhold(text, []) == text
    assert withhold(text, ["a completely different internal remark about budgets"]) == text


def test_a_short_note_is_withheld_only_whole() -> None:
    note = "Deadline is 2026-03-14"  # 16 letters and digits: under a run, over SHORTEST
    assert SHORTEST <= len(letters(note)) < MIN_RUN
    assert withhold("FYI: deadline\u200b is 2026\u201103\u201114.", [note]) == f"FYI: {WITHHELD}."
    assert withhold("The deadline is in March.", [note]) == "The deadline is in March."


# -- the property: any disguise of the kinds above ----------------------------------------


@cache
def equivalents() -> dict[str, list[str]]:
    """Strings of up to two ASCII letters or digits, with the characters of the Basic and
    Supplementary Multilingual Planes that NFKC turns into them (ligatures, full-width,
    mathematical, circled, superscript, ... forms)."""
    table: dict[str, list[str]] = {}
    wanted = set(string.ascii_letters + string.digits)
    for code in range(0x80, 0x20000):
        char = chr(code)
        target = unicodedata.normalize("NFKC", char)
        if target != char and 0 < len(target) <= 2 and set(target) <= wanted:
            table.setdefault(target, []).append(char)
    return table


NOTE_CHARS = string.ascii_letters + string.digits + "  .,;:!?-'()" + "éüßçñ日本語"
SPACES = [" ", "\t", "\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\u2028", "\u205f"]
INVISIBLE = st.characters(categories=["Cf"])


@st.composite
def disguised(draw: st.DrawFn, note: str) -> str:
    """`note` with format characters inserted, whitespace changed, characters (or pairs) put
    in an NFKC-equivalent form, and the case changed, each at random."""
    table, out, i = equivalents(), [], 0
    while i < len(note):
        char, pair = note[i], note[i : i + 2]
        if char.isspace():
            out.append("".join(draw(st.lists(st.sampled_from(SPACES), min_size=1, max_size=3))))
        elif pair in table and draw(st.booleans()):
            out.append(draw(st.sampled_from(table[pair])))
            i += 1
        elif char in table and draw(st.booleans()):
            out.append(draw(st.sampled_from(table[char])))
        else:
            out.append(char.upper() if draw(st.booleans()) else char)
        out.append(draw(st.text(INVISIBLE, max_size=2)))
        i += 1
    return "".join(out)


def notes() -> st.SearchStrategy[str]:
    text = st.text(st.sampled_from(NOTE_CHARS), min_size=SHORTEST, max_size=120)
    return text.filter(lambda t: len(letters(t)) >= SHORTEST)


@settings(max_examples=300, deadline=None)
@given(st.data(), notes())
def test_any_disguised_copy_of_a_note_is_withheld(data: st.DataObject, note: str) -> None:
    copy = data.draw(disguised(note))
    out = withhold(f"\u03a9: {copy} \u03a9", [note])  # Ω is in no note: it stays
    assert WITHHELD in out and not carries(out, note)
    assert out.startswith("\u03a9: ") and out.endswith(" \u03a9")


@settings(max_examples=150, deadline=None)
@given(st.data(), notes())
def test_combining_marks_between_letters_do_not_hide_a_note(data: st.DataObject, note: str) -> None:
    marks = st.text(st.characters(categories=["Mn", "Me"]), max_size=2)
    copy = "".join(c + data.draw(marks) for c in note)
    assert not carries(withhold(f"\u03a9: {copy}", [note]), note)


# -- files ------------------------------------------------------------------------------------


def nothing_before(_path: str) -> bytes | None:
    return None


def test_files_carrying_a_note_are_named() -> None:
    changes: dict[str, str | None] = {
        "docs/a.md": f"Notes:\n{ZWSP.join(NOTE)}\n",
        "src/app.py": "print('hello')\n",
        "old.txt": None,  # a deletion publishes nothing new
        "src/b.py": f"# {NOTE[:30]}\n# {NOTE[30:]}\n",
    }
    assert carrying_internal(changes, [NOTE], nothing_before) == ["docs/a.md", "src/b.py"]
    assert carrying_internal(changes, [], nothing_before) == []
    assert carrying_internal({"src/app.py": NOTE}, ["too short"], nothing_before) == []


def test_a_note_quoting_the_repository_does_not_stop_edits_to_it() -> None:
    line = "def compute_invoice_total(customer, items, discount):"
    note = f"The bug is in `{line}`, it ignores the discount for ACME"
    before = {"src/billing.py": f"{line}\n    return sum(items)\n".encode()}
    edited = {"src/billing.py": f"{line}\n    return sum(items) * (1 - discount)\n"}
    assert carrying_internal(edited, [note], before.get) == []
    moved: dict[str, str | None] = {"src/billing.py": None, "src/invoice.py": f"{line}\n"}
    assert carrying_internal(moved, [note], before.get) == []  # moved within the changeset
    assert carrying_internal({"src/new.py": f"{line}\n"}, [note], nothing_before) == ["src/new.py"]
    leaked = {"src/billing.py": f"{line}\n    # {note}\n"}
    assert carrying_internal(leaked, [note], before.get) == ["src/billing.py"]


def test_a_file_named_after_a_note_is_refused_and_not_named() -> None:
    path = "docs/" + NOTE.replace(" ", "_") + ".md"
    paths = carrying_internal({path: "hi\n"}, [NOTE], nothing_before)
    assert paths == [path]
    message = refusal(paths, [NOTE])
    assert WITHHELD in message and "nothing was published" in message
    assert not carries(message, NOTE)
