"""The jail against the real bubblewrap: hostile commands are contained and reported.

Every case runs a real command under bwrap (installed by `.ci/run`); nothing here is mocked.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.jail import CommandResult, Jail, JailLimits, WorkCopy
from bot_sandbox.forge_server import ForgeServer
from tests.conftest import SECRETS

MIB = 1024 * 1024


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    root = tmp_path / "snapshot"
    (root / "src").mkdir(parents=True)
    (root / "src/app.py").write_text("print('hi')\n")
    (root / "README.md").write_text("# app\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    return root


def small_limits(**overrides: float) -> JailLimits:
    values: dict[str, float] = {
        "timeout_seconds": 10,
        "cpu_seconds": 10,
        "memory_bytes": 512 * MIB,
        "max_processes": 64,
        "max_file_bytes": 8 * MIB,
        "max_output_bytes": 1 * MIB,
        "tmp_bytes": 4 * MIB,
    }
    values.update(overrides)
    return JailLimits(**values)  # type: ignore[arg-type]


@pytest.fixture
def jail() -> Jail:
    return Jail(limits=small_limits())


@pytest.fixture
def work(jail: Jail, snapshot: Path) -> Iterator[WorkCopy]:
    copy = jail.work_copy(snapshot, {})
    yield copy
    copy.remove()


def text(result: CommandResult) -> str:
    return result.output(100_000)


def test_a_command_runs_in_the_working_copy_and_its_edits_fold_back(
    jail: Jail, work: WorkCopy
) -> None:
    result = jail.run(
        "cat src/app.py && echo 'x = 1' >> src/app.py && rm README.md && echo new > NEW.md"
        " && mkdir -p build && echo junk > build/out && echo log > run.log",
        work,
    )
    assert result.ok and "print('hi')" in text(result)
    fold = work.collect({})
    # Ignored paths (.gitignore: build/, *.log) stay out of the changeset.
    assert fold.changes == {
        "src/app.py": "print('hi')\nx = 1\n",
        "README.md": None,
        "NEW.md": "new\n",
    }


def test_changes_made_by_tools_are_in_the_copy_before_the_next_command(
    jail: Jail, work: WorkCopy
) -> None:
    changes: dict[str, str | None] = {"src/app.py": "print('changed')\n", "README.md": None}
    work.sync(changes)
    result = jail.run("cat src/app.py; test -e README.md || echo gone", work)
    assert text(result).split() == ["print('changed')", "gone"]
    assert work.collect(changes).changes == {}  # nothing new: the command only read


def test_endless_loop_is_killed_at_the_deadline(snapshot: Path) -> None:
    jail = Jail(limits=small_limits(timeout_seconds=1.5))
    work = jail.work_copy(snapshot, {})
    try:
        result = jail.run("while :; do :; done", work)
    finally:
        work.remove()
    assert result.timed_out and result.exit_status is None
    assert result.outcome == "timed out (killed)"


def _marker() -> str:
    """A `sleep` argument no other process on the machine has: pgrep can find it."""
    return f"{300 + os.getpid() % 1000}.{time.monotonic_ns() % 10**9}"


def _running(marker: str) -> bool:
    found = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, check=False)
    return found.returncode == 0


def test_background_processes_die_with_the_command(jail: Jail, work: WorkCopy) -> None:
    marker = _marker()
    # Detached twice over (subshell + setsid): it outlives the shell, but not the jail.
    result = jail.run(
        f"(setsid sleep {marker} &); sleep 0.3; pgrep -f 'sleep {marker}' >/dev/null && echo up",
        work,
    )
    assert text(result).split() == ["up"]  # it was running inside when the command ended
    assert not _running(marker), "a process the command left behind survived the jail"


def test_fork_bomb_is_contained_and_other_jails_keep_working(
    snapshot: Path, tmp_path: Path
) -> None:
    jail = Jail(limits=small_limits(timeout_seconds=4, max_processes=32))
    bomb_copy = jail.work_copy(snapshot, {})
    other_copy = jail.work_copy(snapshot, {})
    results: dict[str, CommandResult] = {}
    bomb = threading.Thread(
        target=lambda: results.setdefault(
            "bomb", jail.run("f() { f | f & }; f; sleep 3", bomb_copy)
        )
    )
    try:
        bomb.start()
        time.sleep(1.0)  # let it fill its process quota
        results["other"] = jail.run("echo still-here", other_copy)
        bomb.join()
    finally:
        bomb_copy.remove()
        other_copy.remove()
    assert "bomb" in results  # it ended and was reported
    if os.geteuid() == 0:  # as root each working copy has its own uid and process quota
        assert results["other"].ok and "still-here" in text(results["other"])
    # The daemon's side is unaffected: it can still start processes.
    assert subprocess.run([sys.executable, "-c", "pass"], check=False).returncode == 0


def test_big_files_and_a_full_tmp_are_stopped_by_limits(jail: Jail, work: WorkCopy) -> None:
    result = jail.run(
        "dd if=/dev/zero of=big bs=1M count=64 2>/dev/null; echo file=$?;"
        " dd if=/dev/zero of=/tmp/big bs=1M count=64 2>/dev/null; echo tmp=$?;"
        " wc -c < big; wc -c < /tmp/big",
        work,
    )
    lines = text(result).split()
    assert lines[0] != "file=0" and lines[1] != "tmp=0"
    assert int(lines[2]) <= 8 * MIB and int(lines[3]) <= 4 * MIB
    assert "big: not a regular file, or over" in " ".join(work.collect({}).skipped)


def test_memory_limit(jail: Jail, work: WorkCopy) -> None:
    result = jail.run("python3 -c 'x = bytearray(2 * 1024 ** 3)'", work)
    assert not result.ok and "MemoryError" in text(result)


def test_100_mb_on_stdout_is_cut_at_the_output_limit(jail: Jail, work: WorkCopy) -> None:
    result = jail.run("head -c 100000000 /dev/zero | tr '\\0' x; echo", work)
    assert result.output_limit_hit and not result.ok
    assert MIB < result.output_bytes < 100_000_000
    assert len(result.head) + len(result.tail) <= 64 * 1024  # what we kept in memory


def test_no_network_not_even_to_the_emulator(jail: Jail, work: WorkCopy) -> None:
    with ForgeServer() as server:
        port = int(server.url.rsplit(":", 1)[1])
        result = jail.run(
            f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\"",
            work,
        )
        assert server.requests == []
    assert not result.ok and "ConnectionRefusedError" in text(result)


def test_the_daemons_files_are_not_there(jail: Jail, work: WorkCopy, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "task.json").write_text("{}")
    config = tmp_path / "config.yaml"
    config.write_text(f"github: {{token: {SECRETS[0]}}}\n")
    token_file = tmp_path / "github-token"
    token_file.write_text(SECRETS[0])
    result = jail.run(f"cat {config} {token_file} {state}/task.json; ls /; ls /root", work)
    output = text(result)
    assert output.count("No such file or directory") == 4
    top = set(output.split())
    assert {"usr", "etc", "work", "tmp", "proc", "dev"} <= top
    assert not top & {"root", "home", "var", "opt", "srv", "data"}


def test_no_secret_is_readable_inside(jail: Jail, work: WorkCopy, tmp_path: Path) -> None:
    """Scan everything the jail can read outside /usr for the fake tokens, with the tokens
    in the daemon's own environment and files."""
    os.environ["GITHUB_TOKEN_UNDER_TEST"] = SECRETS[0]
    try:
        (tmp_path / "gitlab-token").write_text(SECRETS[1])
        needles = " ".join(f"-e {s}" for s in SECRETS)
        result = jail.run(
            f"grep -rIl {needles} /etc /tmp /work /dev/shm 2>/dev/null; echo scanned;"
            " for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done",
            work,
        )
    finally:
        del os.environ["GITHUB_TOKEN_UNDER_TEST"]
    output = text(result)
    assert output.split()[0] == "scanned", output  # grep listed no file
    assert "PATH=" in output  # the environments were there to be read
    for secret in SECRETS:
        assert secret not in output


def test_writes_outside_the_working_copy_fail(jail: Jail, work: WorkCopy) -> None:
    result = jail.run(
        "for p in /usr/x /etc/x /x /proc/x; do touch $p 2>/dev/null && echo wrote $p; done;"
        " touch /tmp/private && echo tmp-ok",
        work,
    )
    assert text(result).split() == ["tmp-ok"]
    assert not Path("/tmp/private").exists()


def test_links_planted_by_a_command_never_lead_the_daemon_outside(
    jail: Jail, work: WorkCopy, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret\n")
    result = jail.run(
        f"ln -s {outside}/secret.txt leak.txt; ln -s {outside} src2; mkfifo pipe; echo done",
        work,
    )
    assert result.ok
    fold = work.collect({})
    assert fold.changes == {}  # neither the link nor the FIFO is read as content
    assert any(s.startswith("leak.txt") for s in fold.skipped)
    # A tool write through the planted directory link lands inside the copy, not outside.
    work.sync({"src2/secret.txt": "overwritten\n"})
    assert (outside / "secret.txt").read_text() == "host secret\n"
    assert (work.root / "src2/secret.txt").read_text() == "overwritten\n"
    assert not (work.root / "src2").is_symlink()


def test_the_jail_dies_with_the_daemon(snapshot: Path, tmp_path: Path) -> None:
    marker = _marker()
    script = tmp_path / "parent.py"
    script.write_text(
        "from pathlib import Path\n"
        "from bot.jail import Jail\n"
        "jail = Jail()\n"
        f"work = jail.work_copy(Path({str(snapshot)!r}), {{}})\n"
        f"jail.run('sleep {marker}', work)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], cwd=Path(__file__).parents[2])
    try:
        deadline = time.monotonic() + 30
        while not _running(marker):
            assert time.monotonic() < deadline, "the jailed command never started"
            time.sleep(0.1)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while _running(marker):
            assert time.monotonic() < deadline, "the jailed command outlived its parent"
            time.sleep(0.1)
    finally:
        parent.kill()
        subprocess.run(["pkill", "-f", f"sleep {marker}"], check=False)


def test_a_repository_link_pointing_outside_leads_nowhere(
    jail: Jail, snapshot: Path, tmp_path: Path
) -> None:
    """The repository's own symbolic links are recreated in the working copy (scripts rely on
    them); one pointing at a host secret resolves inside the jail's view, where it is absent."""
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret\n")
    links = {"leak.txt": str(secret), "etc-link": "/etc"}
    work = jail.work_copy(snapshot, {}, links=links, executables=["src/app.py"])
    try:
        result = jail.run("cat leak.txt; ls etc-link/shadow; test -x src/app.py && echo exec", work)
        fold = work.collect({})
    finally:
        work.remove()
    output = text(result)
    assert "host secret" not in output and "No such file" in output
    assert output.split()[-1] == "exec"  # the executable bit came along
    assert fold.changes == {} and fold.skipped == []  # the repository's own links are no change


def test_a_tree_deeper_than_pythons_recursion_limit(snapshot: Path) -> None:
    """Found by the attack review: os.walk and rmtree recursed into a RecursionError, the
    working copy and its uid were never given back."""
    jail = Jail(limits=small_limits())
    work = jail.work_copy(snapshot, {})
    result = jail.run(
        "python3 -c \"import os\nfor i in range(3000):\n os.mkdir('d'); os.chdir('d')\"; "
        "printf x > \"$(printf 'bad\\377name')\"",
        work,
    )
    assert result.ok, text(result)
    fold = work.collect({})
    assert fold.changes == {}
    assert any("deeper than" in s for s in fold.skipped)
    assert any("not a UTF-8 file name" in s for s in fold.skipped)
    work.sync({"src/app.py": "x = 2\n"})
    root = work.root
    work.remove()
    assert not root.exists()
