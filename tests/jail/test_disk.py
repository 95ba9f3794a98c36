"""The jail's writes are bounded in total, not only per file (real bwrap, real tmpfs).

The reproduction of the attack review's finding: `max_file_mb` bounded one file, not their
number; ten 30 MB files with `max_file_mb: 32` put 300 MB on the host.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.agent.commands import CommandSession, run_command_tool
from bot.core.config import RepoChecks
from bot.jail import Jail
from bot.jail.cgroup import TaskCgroups, join_argv
from bot.jail.disk import DiskMode, usage
from bot.jail.process import run_bounded
from bot.llm.base import ToolCall
from bot.repo.workspace import Workspace
from tests.jail.test_commands import COUNTER
from tests.jail.test_jail import MIB, small_limits, text

TEN_BIG_FILES = (
    "for i in 0 1 2 3 4 5 6 7 8 9; do"
    " dd if=/dev/zero of=big$i bs=1M count=30 2>&1 | grep -i 'space' ; done; echo done"
)


@pytest.fixture
def copies() -> Iterator[Path]:
    """Where the working copies go: outside tmp_path, which the jail's uid cannot enter."""
    parent = Path(tempfile.mkdtemp(prefix="bot-copies-"))
    parent.chmod(0o755)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


def _jail(copies: Path, **modes: tuple[DiskMode, ...]) -> Jail:
    limits = small_limits(max_file_bytes=32 * MIB, disk_bytes=64 * MIB, timeout_seconds=30)
    return Jail(limits=limits, work_parent=copies, **modes)


def test_ten_big_files_fill_the_copys_own_filesystem_not_the_host(
    copies: Path, snapshot: Path
) -> None:
    jail = _jail(copies)
    work = jail.work_copy(snapshot, {})
    try:
        result = jail.run(TEN_BIG_FILES, work)
        assert jail.host_limits()["disk_mode"] == "tmpfs"
        on_host = list(copies.rglob("*"))
        held = usage(work.root)
    finally:
        work.remove()
    output = text(result)
    assert "No space left on device" in output, output
    assert held <= 64 * MIB  # not 300 MB
    # The host's directory under the copy stays empty: the files were never on its disk.
    assert [p for p in on_host if p.is_file()] == []


def test_a_command_that_fills_the_copy_reads_enospc(tmp_path: Path, copies: Path) -> None:
    root = tmp_path / "snapshot"
    root.mkdir()
    (root / "README.md").write_text("# app\n")
    (root / ".snapshot-complete").write_text("x")
    workspace = Workspace(root, {})
    session = CommandSession(_jail(copies), workspace, RepoChecks(), head_trusted=True)
    try:
        tool = run_command_tool(session, COUNTER, 4000)
        result = tool.run(tool.args(command=TEN_BIG_FILES), ToolCall("c1", "run_command", "{}"))
    finally:
        session.close()
    assert "No space left on device" in result.content  # what the model reads


def test_the_watchdog_stops_a_command_past_the_limit_where_no_tmpfs_can_be_had(
    copies: Path, snapshot: Path
) -> None:
    jail = _jail(copies, disk_modes=(DiskMode.WATCHDOG,))
    work = jail.work_copy(snapshot, {})
    try:
        result = jail.run(
            "for i in $(seq 40); do dd if=/dev/zero of=f$i bs=1M count=8 2>/dev/null;"
            " sleep 0.3; done; echo all-written",
            work,
        )
        held = usage(work.root)
    finally:
        work.remove()
    assert jail.host_limits()["disk_mode"] == "watchdog"
    assert result.stopped is not None and result.stopped.startswith("disk limit reached")
    assert result.outcome.endswith("(killed)") and "all-written" not in text(result)
    assert held < 40 * 8 * MIB


def test_the_filesystem_goes_with_the_copy(copies: Path, snapshot: Path) -> None:
    jail = _jail(copies)
    work = jail.work_copy(snapshot, {})
    jail.run("dd if=/dev/zero of=junk bs=1M count=10 2>/dev/null", work)
    root, place = work.root, work.area.jail_root
    assert (root / "junk").exists()
    work.remove()
    assert not root.exists() and not place.exists()


def test_a_copy_bigger_than_the_limit_is_refused_and_cleaned_up(
    tmp_path: Path, copies: Path
) -> None:
    big = tmp_path / "big-snapshot"
    big.mkdir()
    (big / "data.bin").write_bytes(os.urandom(1024) * 80 * 1024)  # 80 MiB > 64
    jail = _jail(copies)
    with pytest.raises(OSError, match="No space left"):
        jail.work_copy(big, {})
    assert list(copies.iterdir()) == []


# -- cgroups ----------------------------------------------------------------------------------
# This machine's memory controller is on cgroup v1, so no delegated v2 subtree can be made
# here: these check our side of the protocol against a directory standing in for one.


def test_a_task_cgroup_gets_its_limits_and_goes_away(tmp_path: Path) -> None:
    cgroups = TaskCgroups(tmp_path)
    path = cgroups.create(256 * MIB, 64)
    assert (path / "memory.max").read_text() == str(256 * MIB)
    assert (path / "pids.max").read_text() == "64"
    for name in ("memory.max", "pids.max"):  # the kernel's files go with the directory
        (path / name).unlink()
    cgroups.remove(path)
    assert not path.exists()


def test_a_command_joins_its_cgroup_before_anything_else_runs(tmp_path: Path) -> None:
    (tmp_path / "cgroup.procs").write_text("")
    result = run_bounded(
        [*join_argv(tmp_path), "/bin/sh", "-c", "echo ran"],
        command="x",
        env={"PATH": "/usr/bin:/bin"},
        timeout=10,
        max_output_bytes=MIB,
    )
    assert result.ok and text(result).strip() == "ran"
    assert (tmp_path / "cgroup.procs").read_text() == "0\n"  # the shell wrote its own pid


def test_no_delegated_cgroup_is_reported_with_its_reason() -> None:
    cgroups, reason = TaskCgroups.detect()
    if cgroups is not None:
        pytest.skip(f"this host delegates a cgroup: {reason}")
    assert reason
