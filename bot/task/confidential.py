"""Internal notes stay internal: nothing the bot publishes quotes them.

GitLab internal notes (formerly "confidential") are readable by project members only; the bot,
a member, reads them and the model is told not to reveal them. That is a request to a model,
so everything the bot publishes is also checked here. Posts (notes, the plan comment and its
edits, the final answer, which is also the request description and the commit message) have
every run copied from an internal note replaced by `WITHHELD`; a changeset whose files carry
one is not published at all (`InternalNotes.refusal`, asked by `finish` before it
publishes).

What is compared is the text as a reader sees it, so that look-alikes of a note match it:
HTML entities decoded; compatibility forms folded (NFKD: full-width letters, ligatures,
mathematical letters, superscripts) and case folded; and of that only the letters and digits
kept. Everything else is ignored: whitespace and line breaks, punctuation and symbols (so
Markdown quote marks, emphasis, backslash escapes, code comment leaders and string quotes
too), combining marks (category M: accents, strike-throughs, variation selectors), and
control, format and unassigned characters (category C: zero-width spaces and joiners, soft
hyphens, bidi controls, U+FEFF, tags). A second reading drops HTML tags and comments too,
since `Cust<span></span>omer` renders as one word. A run is `MIN_RUN` letters or digits.

Look-alike letters of other scripts (Cyrillic U+0430 for Latin "a", Greek omicron for "o")
count as the Latin letter they imitate: Unicode's confusables (UTS #39), as the
`confusable_homoglyphs` package ships them. A file's name and its content are read as one
text, so a note split between the two is found too; every version of a note the bot has read
counts, also after it is edited or deleted (the versions delivered to the model are recorded in
the conversation, so a restart knows them).

Not covered: a note spread over several posts or files in pieces shorter than a run, ASCII
look-alikes of each other (`l` and `1`, `O` and `0`), and any encoding (base64, spelling out,
translation): the filter catches copies, not a model set on smuggling text out.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import PurePosixPath

from confusable_homoglyphs.confusables import confusables_data

from bot.core.log import get_logger
from bot.forge.base import Forge
from bot.model.thread import Platform, TaskKey

log = get_logger(__name__)

WITHHELD = "[internal note withheld]"
MIN_RUN = 24  # letters and digits copied in a row: a quote, not a coincidence
SHORTEST = 12  # notes with fewer letters and digits cannot be told from ordinary words

# CommonMark: entity and numeric character references, with their semicolon.
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_TAG = r"<!--.*?-->|</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>"
_ENTITY_OR_TAG = re.compile(f"{_ENTITY.pattern}|{_TAG}", re.DOTALL)
# Letters (category Lo) that render as nothing: Unicode's Default_Ignorable_Code_Point fillers.
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0")


@lru_cache(maxsize=8192)
def _fold(char: str) -> str:
    """What one character counts as: its letters and digits after compatibility
    decomposition, case folding and the look-alike map; "" for everything else."""
    if char.isascii():
        return char.lower() if char.isalnum() else ""
    # Folding the case can undo a decomposition (U+0130 gives "i" + a combining dot): again.
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", char).casefold())
    kept = (c for c in folded if unicodedata.category(c)[0] in "LN" and c not in _FILLERS)
    return "".join(_latin().get(c, c) for c in kept)


@lru_cache(maxsize=1)
def _latin() -> dict[str, str]:
    """Non-ASCII letters and digits that look like an ASCII letter or digit: that one, lower
    case (from Unicode's confusables, both directions of each pair the package lists)."""
    table: dict[str, str] = {}
    for char, glyphs in confusables_data.items():
        for glyph in glyphs:
            other = str(glyph.get("c", ""))
            for source, target in ((char, other), (other, char)):
                if len(source) == 1 and not source.isascii() and _ascii_alnum(target):
                    table.setdefault(source, target.lower())
    return table


def _ascii_alnum(text: str) -> bool:
    return len(text) == 1 and text.isascii() and text.isalnum()


@dataclass(frozen=True)
class _Reading:
    """A text as compared (`text`), with the span of the original behind each character."""

    text: str
    starts: list[int]
    ends: list[int]


def _read(text: str, keep_tags: bool) -> _Reading:
    """`text` as compared; without `keep_tags`, HTML tags and comments count as nothing."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []

    def add(piece: str, start: int, end: int) -> None:
        for char in piece:
            for kept in _fold(char):
                out.append(kept)
                starts.append(start)
                ends.append(end)

    pattern = _ENTITY if keep_tags else _ENTITY_OR_TAG
    last = 0
    for match in pattern.finditer(text):
        for index in range(last, match.start()):
            add(text[index], index, index + 1)
        if match.group().startswith("&"):
            add(html.unescape(match.group()), match.start(), match.end())
        last = match.end()
    for index in range(last, len(text)):
        add(text[index], index, index + 1)
    return _Reading("".join(out), starts, ends)


def _readings(text: str) -> list[_Reading]:
    return [_read(text, keep_tags=True), _read(text, keep_tags=False)]


class Runs:
    """Every run of `MIN_RUN` letters and digits of some texts (a whole text when shorter)."""

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self.windows: dict[int, set[str]] = {}
        for text in texts:
            for reading in _readings(text):
                if len(reading.text) < SHORTEST:
                    continue
                size = min(MIN_RUN, len(reading.text))
                self.windows.setdefault(size, set()).update(_windows(reading.text, size))

    def __bool__(self) -> bool:
        return bool(self.windows)

    def without(self, texts: Iterable[str]) -> Runs:
        """These runs less those the `texts` have too."""
        left = Runs()
        readings = [r.text for t in texts for r in _readings(t)]
        for size, known in self.windows.items():
            seen = {w for r in readings for w in _windows(r, size)}
            if known - seen:
                left.windows[size] = known - seen
        return left

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where `text` carries one of the runs: (start, end) ranges of the original, merged."""
        found: list[tuple[int, int]] = []
        for reading in _readings(text):
            covered = [False] * len(reading.text)
            for size, known in self.windows.items():
                for i in range(len(reading.text) - size + 1):
                    if reading.text[i : i + size] in known:
                        covered[i : i + size] = [True] * size
            found += _spans(covered, reading)
        return _merged(text, found)

    def found(self, text: str) -> bool:
        return bool(self.windows) and bool(self.spans(text))


def _windows(text: str, size: int) -> set[str]:
    return {text[i : i + size] for i in range(len(text) - size + 1)}


def _spans(covered: list[bool], reading: _Reading) -> list[tuple[int, int]]:
    """Covered stretches of a reading as (start, end) ranges of the original."""
    spans: list[tuple[int, int]] = []
    run_start: int | None = None
    for i, flag in enumerate([*covered, False]):
        if flag and run_start is None:
            run_start = i
        elif not flag and run_start is not None:
            spans.append((reading.starts[run_start], reading.ends[i - 1]))
            run_start = None
    return spans


def _merged(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans as one; each reaching over the marks and invisible characters that
    follow it (a combining mark belongs to the letter before it)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        while end < len(text) and unicodedata.category(text[end])[0] in "MC":
            if text[end].isspace():
                break
            end += 1
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def withhold(text: str, secrets: Iterable[str]) -> str:
    """`text` with every run copied from one of `secrets` replaced by `WITHHELD`."""
    runs = Runs(secrets)
    spans = runs.spans(text) if runs else []
    if not spans:
        return text
    out, last = [], 0
    for start, end in spans:
        out += [text[last:start], WITHHELD]
        last = end
    out.append(text[last:])
    log.warning("internal_text_withheld", runs=len(spans))
    return "".join(out)


def carrying_internal(
    changes: Mapping[str, str | None],
    secrets: Iterable[str],
    before: Callable[[str], bytes | None],
) -> list[str]:
    """The changed files whose name or new content carries a run of one of `secrets` that
    none of the changed files had before (`before(path)`: its content at the pinned commit,
    None when new). A note that quotes the repository does not make editing it a leak."""
    runs = Runs(secrets)
    if not runs:
        return []
    suspects = [p for p, content in changes.items() if _carries(runs, p, content)]
    if not suspects:
        return []
    old = [(p, before(p)) for p in changes]
    known = [f"{p}\n{data.decode('utf-8', 'replace')}" for p, data in old if data is not None]
    runs = runs.without(known)
    return sorted(p for p in suspects if _carries(runs, p, changes[p]))


def _carries(runs: Runs, path: str, content: str | None) -> bool:
    """A file's name and content read as one text, with and without the name's extension
    (which stands between them): a note split between name and content is found."""
    if content is None:
        return False
    stem = str(PurePosixPath(path).with_suffix("")) if PurePosixPath(path).suffix else path
    return any(runs.found(f"{name}\n{content}") for name in {path, stem})


def refusal(paths: list[str], secrets: Iterable[str]) -> str:
    """Why a changeset carrying internal text is not published; names the files, not the
    note (a file named after the note is named withheld)."""
    secrets = list(secrets)
    names = ", ".join(f"`{withhold(path, secrets)}`" for path in paths)
    return (
        f"the changes carry text from an internal note of this thread, in {names}; nothing was "
        "published. Internal notes stay internal: say in a public comment what may be written "
        "down, then ask again with /bot"
    )


class InternalNotes:
    """Every version of a thread's internal notes the bot has read, kept current with a cursor
    of its own: the first check after a start reads the whole thread, later ones only what
    changed. A version the model was shown stays withheld after the note is edited or deleted:
    `remember` takes what the comment detector delivers, and `known` (from the conversation,
    where deliveries are recorded) seeds a new process with what earlier ones delivered."""

    def __init__(self, forge: Forge, key: TaskKey, known: Iterable[str] = ()) -> None:
        self.forge = forge
        self.key = key
        self.texts: set[str] = set(known)
        self.since: datetime | None = None

    def remember(self, text: str) -> None:
        self.texts.add(text)

    def current(self) -> list[str]:
        if self.key.platform is Platform.GITHUB:
            return []  # GitHub has no internal comments on issues or pull requests
        comments = self.forge.list_comments(self.key, since=self.since)
        for comment in comments:
            if comment.internal:
                self.texts.add(comment.body)
        if comments:
            newest = max(c.updated_at for c in comments)
            self.since = newest if self.since is None else max(self.since, newest)
        return sorted(self.texts)

    def withhold(self, text: str) -> str:
        return withhold(text, self.current())

    def refusal(
        self, changes: Mapping[str, str | None], before: Callable[[str], bytes | None]
    ) -> str | None:
        """Why `changes` may not be published (files carry internal text), or None."""
        if not changes:
            return None
        notes = self.current()
        paths = carrying_internal(changes, notes, before)
        if not paths:
            return None
        log.warning("internal_text_in_changes", files=len(paths))
        return refusal(paths, notes)
