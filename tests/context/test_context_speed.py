"""The opening context's shortcuts give exactly what the plain way gives, only sooner."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.context.engine import MAX_FILE_READ, _search_hits
from bot.context.render import named_identifiers, named_paths
from bot.repo import listing as listing_module
from bot.repo.listing import snapshot_listing
from bot.repo.snapshot import write_index
from bot.repo.workspace import Workspace, is_binary


def _repo(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "src/a.py").write_text("def check_password():\n    pass\n")
    (root / "src/b.py").write_text("x = 1\n")


def test_a_snapshot_index_is_parsed_once_for_every_workspace_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repo(tmp_path)
    write_index(tmp_path)
    reads: list[Path] = []
    real = listing_module.read_index
    monkeypatch.setattr(listing_module, "read_index", lambda root: reads.append(root) or real(root))
    first = Workspace(tmp_path, {}).listing()
    again = Workspace(tmp_path, {}).listing()
    assert again is first and len(reads) == 1
    assert [e.path for e in Workspace(tmp_path, {}).files()] == ["src/a.py", "src/b.py"]
    assert len(reads) == 1  # files() shares it too
    (tmp_path / "src/c.py").write_text("y\n")
    write_index(tmp_path)  # a new index (a snapshot downloaded again): read anew
    assert "src/c.py" in Workspace(tmp_path, {}).listing().known
    assert len(reads) == 2


def test_a_changeset_gets_its_own_listing_not_the_shared_one(tmp_path: Path) -> None:
    _repo(tmp_path)
    write_index(tmp_path)
    shared = snapshot_listing(tmp_path)
    merged = Workspace(tmp_path, {"new.py": "z\n", "src/b.py": None}).listing()
    assert merged.paths == ("src/a.py", "new.py")
    assert shared.paths == ("src/a.py", "src/b.py")  # untouched


def test_the_listing_cache_is_bounded(tmp_path: Path) -> None:
    for n in range(listing_module.CACHED_LISTINGS + 3):
        root = tmp_path / str(n)
        _repo(root)
        write_index(root)
        snapshot_listing(root)
    assert len(listing_module._cache) <= listing_module.CACHED_LISTINGS


def test_a_bare_file_name_resolves_through_the_listing_like_through_the_paths(
    tmp_path: Path,
) -> None:
    _repo(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/b.py").write_text("dup\n")
    write_index(tmp_path)
    listing = snapshot_listing(tmp_path)
    text = "See a.py and b.py, and src/b.py."
    assert listing.by_name["a.py"] == "src/a.py" and listing.by_name["b.py"] is None
    assert named_paths(text, listing.known, lambda: listing.by_name) == ["src/a.py", "src/b.py"]
    assert named_paths(text, set(listing.paths)) == ["src/a.py", "src/b.py"]


def _identifiers_one_by_one(text: str) -> list[str]:
    out = []
    for word in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*(?:\(\))?)", text):
        bare = word.removesuffix("()")
        if word.endswith("()") or ("_" in bare and len(bare) > 3) or re.search(r"[a-z][A-Z]", bare):
            out.append(bare)
    return list(dict.fromkeys(out))


WORDS = st.sampled_from(["run()", "run", "check_pw", "x_y", "fooBar", "the", "a()", "日本", "é"])


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, max_size=30), st.sampled_from([" ", "\n", ".", ""]))
def test_identifiers_are_the_same_looked_at_once_each(words: list[str], gap: str) -> None:
    text = gap.join(words)
    assert named_identifiers(text) == _identifiers_one_by_one(text)


def _hits_decoding_every_file(workspace: Workspace, text: str) -> list[str]:
    identifiers = named_identifiers(text)[:10]
    pattern = re.compile(r"\b(" + "|".join(re.escape(i) for i in identifiers) + r")\b")
    scored = []
    for entry in workspace.files():
        data = workspace.read_listed(entry.path)
        if data is None or len(data) > MAX_FILE_READ or is_binary(data):
            continue
        hits = len(pattern.findall(data.decode("utf-8", errors="replace")))
        if hits:
            scored.append((-hits, entry.path))
    return [path for _, path in sorted(scored)[:5]]


# Around the identifier: non-ASCII letters (word characters once decoded, not as bytes),
# invalid UTF-8, a NUL (binary), ASCII word characters and separators.
SURROUND = st.sampled_from(
    [b"", b" ", b"\xc3\xa9", "日".encode(), b"\xff", b"\x00", b"_", b"x", b"(", b"\n"]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(SURROUND, st.booleans(), SURROUND), min_size=1, max_size=6))
def test_search_skipping_files_without_the_bytes_finds_what_decoding_all_finds(
    tmp_path_factory: pytest.TempPathFactory, files: list[tuple[bytes, bool, bytes]]
) -> None:
    root = tmp_path_factory.mktemp("repo")
    for n, (before, named, after) in enumerate(files):
        word = b"check_password" if named else b"check_pass"
        (root / f"f{n}.py").write_bytes((before + word + after) * (n + 1))
    write_index(root)
    workspace = Workspace(root, {})
    text = "It fails in check_password."
    got = _search_hits(workspace, workspace.listing(), text, exclude=set())
    assert got == _hits_decoding_every_file(workspace, text)


def test_a_listed_file_is_read_whole_past_one_read(tmp_path: Path) -> None:
    data = os.urandom(200_000)
    (tmp_path / "big.bin").write_bytes(data)
    write_index(tmp_path)
    assert Workspace(tmp_path, {}).read_listed("big.bin") == data
    assert Workspace(tmp_path, {}).read_listed("missing.bin") is None
