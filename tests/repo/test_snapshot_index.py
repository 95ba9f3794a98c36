"""The snapshot's file index: listing a snapshot is one read, and lists exactly what is there."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.context.render import render_tree, tree, tree_children
from bot.repo.snapshot import INDEX, read_index, write_index
from bot.repo.workspace import Workspace


def _walk(root: Path) -> list[tuple[str, int]]:
    found = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if not rel.startswith(".snapshot"):
                found.append((rel, os.path.getsize(os.path.join(dirpath, name))))
    return sorted(found)


def _tree(root: Path) -> None:
    (root / "src/pkg").mkdir(parents=True)
    (root / "src/pkg/a.py").write_text("a = 1\n")
    (root / "src/b.py").write_text("b\n")
    (root / "README.md").write_text("# r\n")
    (root / "名前.txt").write_text("日本語\n")
    (root / ".snapshot-complete").write_text("x")


def test_files_come_from_the_index_with_the_changeset_on_top(tmp_path: Path) -> None:
    _tree(tmp_path)
    write_index(tmp_path)
    (tmp_path / "src/b.py").unlink()  # the index is what is listed: one read, no walk
    listed = {
        e.path: e.size for e in Workspace(tmp_path, {"new.py": "x\n", "README.md": None}).files()
    }
    assert listed == {"src/pkg/a.py": 6, "src/b.py": 2, "名前.txt": 10, "new.py": 2}


def test_a_snapshot_cached_before_the_index_gets_one(tmp_path: Path) -> None:
    _tree(tmp_path)
    assert not (tmp_path / INDEX).exists()
    assert sorted(read_index(tmp_path)) == _walk(tmp_path)
    assert (tmp_path / INDEX).exists()
    (tmp_path / INDEX).write_text("{not json")  # a torn or foreign index is rebuilt
    assert sorted(read_index(tmp_path)) == _walk(tmp_path)


PATHS = st.lists(
    st.lists(st.sampled_from(["a", "b", "src", "x.py", "y.md", "lib"]), min_size=1, max_size=5),
    max_size=60,
).map(lambda parts: sorted({"/".join(p) for p in parts}))


@settings(max_examples=200, deadline=None)
@given(paths=PATHS)
def test_one_pass_renders_every_depth_like_the_tree_of_that_depth(paths: list[str]) -> None:
    children = tree_children(paths, 3)
    for depth in (1, 2, 3):
        assert render_tree(children, depth) == tree(paths, depth)


def test_tree_text() -> None:
    paths = ["README.md", "src/app.py", "src/pkg/a.py", "src/pkg/deep/b.py", "docs/x.md"]
    assert tree(paths, 2) == "docs/\n  x.md\nsrc/\n  pkg/\n  app.py\nREADME.md"
    assert tree(paths, 1) == "docs/\nsrc/\nREADME.md"


def test_trees_come_from_the_snapshot_cache_unless_the_changes_add_or_delete_files(
    tmp_path: Path,
) -> None:
    from bot.context.engine import _trees
    from bot.repo.snapshot import TREES

    _tree(tmp_path)
    write_index(tmp_path)
    edited = Workspace(tmp_path, {"README.md": "# r2\n"})
    first = _trees(edited, [e.path for e in edited.files()])
    assert (tmp_path / TREES).exists() and "src/" in first["3"]
    added = Workspace(tmp_path, {"tools/new.py": "x\n"})
    assert "tools/" in _trees(added, [e.path for e in added.files()])["3"]  # not the cache
    gone = Workspace(tmp_path, {"src/b.py": None})
    assert "b.py" not in _trees(gone, [e.path for e in gone.files()])["3"]
