"""Tool error paths and snapshot safety, on real files."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bot.agent.repo_tools import repo_tools
from bot.agent.tools import Toolbox, finish_tool
from bot.context.tokens import TokenCounter
from bot.llm.base import ToolCall
from bot.repo.snapshot import COMPLETE, Limits, extract, snapshot
from bot.repo.workspace import Workspace, WorkspaceError


@pytest.fixture
def box(tmp_path: Path) -> tuple[Toolbox, dict[str, str | None]]:
    root = tmp_path / "snap"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(
        "def main():\n    print('hi')\n\n\ndef helper():\n    print('hi')\n"
    )
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (root / "README.md").write_text("# App\n" + "more\n" * 2000)
    changes: dict[str, str | None] = {}
    workspace = Workspace(root, changes)
    return Toolbox(
        [finish_tool(), *repo_tools(workspace, TokenCounter(), 300, trusted=True)]
    ), changes


def run(box: Toolbox, name: str, **arguments: object) -> str:
    return box.execute(ToolCall("c1", name, json.dumps(arguments))).content


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("read_file", {"path": "../etc/passwd"}, "leaves the repository"),
        ("read_file", {"path": "src/../../x"}, "leaves the repository"),
        ("read_file", {"path": "/etc/passwd"}, "is absolute"),
        ("read_file", {"path": "logo.png"}, "binary file"),
        ("read_file", {"path": "missing.py"}, "no file 'missing.py'"),
        ("read_file", {"path": "src"}, "it is a directory"),
        ("read_file", {"path": "src/app.py", "start_line": 99}, "past the end"),
        ("search_code", {"pattern": "(unclosed"}, "bad regular expression"),
        ("write_file", {"path": "../outside.txt", "content": "x"}, "leaves the repository"),
        ("edit_file", {"path": "src/app.py", "old": "nope", "new": "x"}, "was not found"),
        ("edit_file", {"path": "src/app.py", "old": "print('hi')", "new": "x"}, "occurs 2 times"),
        ("list_files", {"path": "nowhere"}, "no directory"),
        ("read_file", {}, "path: Field required"),
        ("read_file", {"path": "a", "start_line": 0}, "start_line"),
        ("read_file", {"path": "a", "bogus": 1}, "bogus"),
    ],
)
def test_error_paths_are_answered(
    box: tuple[Toolbox, dict[str, str | None]],
    name: str,
    arguments: dict[str, object],
    expected: str,
) -> None:
    result = run(box[0], name, **arguments)
    assert result.startswith("error:"), result
    assert expected in result
    assert box[1] == {}  # nothing was written


def test_malformed_json_and_unknown_tool(box: tuple[Toolbox, dict[str, str | None]]) -> None:
    bad = box[0].execute(ToolCall("c", "read_file", '{"path": '))
    assert bad.malformed and "not valid JSON" in bad.content
    unknown = box[0].execute(ToolCall("c", "rm_rf", "{}"))
    assert (
        unknown.malformed
        and "unknown tool 'rm_rf'" in unknown.content
        and "read_file" in unknown.content
    )


def test_reads_are_numbered_and_budget_capped(box: tuple[Toolbox, dict[str, str | None]]) -> None:
    text = run(box[0], "read_file", path="src/app.py", start_line=2, end_line=2)
    assert text.splitlines()[1] == "2|     print('hi')"
    long = run(box[0], "read_file", path="README.md")
    assert TokenCounter().count(long) <= 300 and "truncated:" in long


def test_writes_go_to_the_changeset_and_are_read_back(
    box: tuple[Toolbox, dict[str, str | None]],
) -> None:
    toolbox, changes = box
    run(
        toolbox,
        "edit_file",
        path="src/app.py",
        old="def main():\n    print('hi')",
        new="def main():\n    print('hello')",
    )
    run(toolbox, "write_file", path="./docs/new.md", content="# New\n")
    assert set(changes) == {"src/app.py", "docs/new.md"}
    assert "print('hello')" in run(toolbox, "read_file", path="src/app.py")
    listing = run(toolbox, "list_files", path=".", depth=2)
    assert "docs/" in listing and "new.md" in listing and "logo.png" in listing


def test_search_groups_by_file_dedupes_and_keeps_fences_whole(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    (root / "a.md").write_text("```python\nx = 1\n```\nx = 1\nx = 1\n")
    (root / "b.py").write_text("x = 1\n")
    toolbox = Toolbox(repo_tools(Workspace(root, {}), TokenCounter(), 2000, trusted=True))
    result = run(toolbox, "search_code", pattern=r"x = 1|```")
    assert result.startswith("4 matching lines in 2 files")
    a_block = result.split("a.md\n", 1)[1].split("\n\nb.py")[0]
    assert a_block.startswith("````\n") and a_block.rstrip().endswith("````")  # longer fence
    assert a_block.count("x = 1") == 1  # identical hits once


def make_archive(tmp_path: Path, members: list[tuple[str, str, bytes | str]]) -> Path:
    path = tmp_path / "a.tar.gz"
    with tarfile.open(path, mode="w:gz") as tar:
        for kind, name, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = payload.encode() if isinstance(payload, str) else payload
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            elif kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = str(payload)
                tar.addfile(info)
            elif kind == "hardlink":
                info.type = tarfile.LNKTYPE
                info.linkname = str(payload)
                tar.addfile(info)
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
                tar.addfile(info)
    return path


def test_hostile_archive_is_extracted_safely(tmp_path: Path) -> None:
    archive = make_archive(
        tmp_path,
        [
            ("file", "top/ok.txt", "fine"),
            ("file", "top/../../escape.txt", "evil"),
            ("file", "/abs/path.txt", "evil"),
            ("symlink", "top/link", "/etc/passwd"),
            ("symlink", "top/dir", ".."),
            ("file", "top/dir/through-link.txt", "evil"),
            ("hardlink", "top/hard", "/etc/shadow"),
            ("fifo", "top/pipe", ""),
            ("file", "top/big.bin", b"x" * 2048),
        ],
    )
    dest = tmp_path / "out"
    dest.mkdir()
    skipped = extract(archive, dest, Limits(max_file_bytes=1024))
    assert (dest / "ok.txt").read_text() == "fine"
    assert not (tmp_path / "escape.txt").exists() and not Path("/abs/path.txt").exists()
    for link in ("link", "hard"):
        assert not (dest / link).is_symlink() and "link to" in (dest / link).read_text()
    assert not (dest / "pipe").exists() and not (dest / "big.bin").exists()
    assert all(p.resolve().is_relative_to(dest.resolve()) for p in dest.rglob("*"))
    assert any("unsafe path" in s for s in skipped) and any("per-file cap" in s for s in skipped)


def test_file_count_cap(tmp_path: Path) -> None:
    archive = make_archive(tmp_path, [("file", f"top/f{i}.txt", "x") for i in range(50)])
    dest = tmp_path / "out"
    dest.mkdir()
    skipped = extract(archive, dest, Limits(max_files=10))
    assert len(list(dest.glob("f*.txt"))) == 10
    assert any("cap reached" in s for s in skipped)


class SlowArchives:
    """Just enough of a Forge for `snapshot`: a slow archive download, counted."""

    def __init__(self, tmp: Path) -> None:
        self.downloads = 0
        self.source = make_archive(tmp, [("file", "top/a.txt", "a"), ("file", "top/b/c.txt", "c")])

    def download_archive(self, repo: str, sha: str, dest: Path) -> None:
        self.downloads += 1
        time.sleep(0.2)
        dest.write_bytes(self.source.read_bytes())


def test_concurrent_workers_share_one_snapshot_download(tmp_path: Path) -> None:
    forge = SlowArchives(tmp_path)
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(8) as pool:
        roots = list(pool.map(lambda _: snapshot(forge, "a/b", "abc123", cache), range(8)))  # type: ignore[arg-type]
    assert forge.downloads == 1
    assert len(set(roots)) == 1 and (roots[0] / "b" / "c.txt").read_text() == "c"
    assert [p.name for p in (cache / "snapshots").iterdir()] == ["abc123"]  # no partial leftovers


def test_snapshot_keeps_modes_link_targets_and_left_out_paths_without_real_links(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "modes.tar.gz"
    with tarfile.open(archive, mode="w:gz") as tar:
        for name, data, mode in (
            ("top/run.sh", b"#!/bin/sh\n", 0o755),
            ("top/z.bin", b"x" * 64, 0o644),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("top/escape")
        link.type, link.linkname = tarfile.SYMTYPE, "../../etc/passwd"
        tar.addfile(link)

    def fetch(where: str) -> Path:
        dest = tmp_path / where
        dest.mkdir()
        extract(archive, dest, Limits(max_file_bytes=32))
        (dest / COMPLETE).write_text("sha")
        return dest

    dest = fetch("out")
    shutil.rmtree(dest)  # the cache lost it before the first look: fetched again, meta too
    workspace = Workspace(dest, {}, refetch=lambda: fetch("again"))
    assert workspace.mode("run.sh") == "100755" and workspace.mode("escape") == "120000"
    dest = workspace.root
    assert workspace.link_target("escape") == "../../etc/passwd"
    assert workspace.snapshot_bytes("escape") == b"../../etc/passwd"
    assert not (dest / "escape").is_symlink()
    assert workspace.exists_in_snapshot("z.bin") and workspace.left_out("z.bin")
    with pytest.raises(WorkspaceError, match="left out"):
        workspace.read("z.bin")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        workspace.write("escape", "text")
    assert ".snapshot-meta.json" not in [e.path for e in workspace.files()]
