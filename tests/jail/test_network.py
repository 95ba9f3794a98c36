"""Networked setup gets a network of its own, never the host's (real bwrap, real slirp4netns).

The reproduction of the attack review's finding: a networked setup step reached a listener on
the host's 127.0.0.1 (`--share-net`). Here the step of a trusted head reaches a stand-in
outside server (the machine's own non-loopback address, or a network namespace the test makes)
but neither the host's 127.0.0.1 nor slirp's mapping of it (10.0.2.2); over an untrusted head
it reaches nothing at all.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from bot.agent.commands import CommandSession, run_command_tool
from bot.core.config import RepoChecks
from bot.jail import Jail
from bot.jail.network import slirp_path
from bot.llm.base import ToolCall
from bot.repo.workspace import Workspace
from tests.jail import standins
from tests.jail.standins import FETCH, StandIn
from tests.jail.test_commands import COUNTER
from tests.jail.test_jail import small_limits, text

pytestmark = pytest.mark.skipif(slirp_path() is None, reason="slirp4netns is not installed")


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "snapshot"
    root.mkdir()
    (root / "setup.py").write_text("print('the fork supplies this')\n")
    (root / ".snapshot-complete").write_text("x")
    return Workspace(root, {})


def _fetch(outside: StandIn, loopback: StandIn) -> str:
    urls = [
        outside.url("outside"),
        loopback.url("loopback"),
        loopback.url("gateway", "10.0.2.2"),  # slirp's address for the host's loopback
    ]
    return f"{FETCH} {' '.join(urls)}"


def _setup_once(workspace: Workspace, command: str, *, trusted: bool) -> str:
    checks = RepoChecks(setup=(command,), checks=("true",), setup_network=True)
    session = CommandSession(Jail(limits=small_limits()), workspace, checks, head_trusted=trusted)
    try:
        session.run_checks()
    finally:
        session.close()
    assert len(session.setup_results) == 1
    return text(session.setup_results[0])


def test_a_trusted_heads_networked_setup_reaches_outside_but_not_the_hosts_loopback(
    workspace: Workspace, outside: StandIn, loopback: StandIn
) -> None:
    before = len(outside.hits)
    output = _setup_once(workspace, _fetch(outside, loopback), trusted=True)
    lines = output.splitlines()
    assert f"{outside.url('outside')} reached-outside" in lines, output
    assert outside.hits[before:] == ["hit /outside"]
    assert loopback.hits == [], f"the host's 127.0.0.1 was reached: {output}"
    assert "reached-loopback" not in output and "reached-gateway" not in output
    assert f"{loopback.url('loopback')} failed" in output  # the namespace's own loopback


def test_an_untrusted_heads_setup_reaches_neither_whatever_the_configuration_says(
    workspace: Workspace, outside: StandIn, loopback: StandIn
) -> None:
    before = len(outside.hits)
    with capture_logs() as logs:
        output = _setup_once(workspace, _fetch(outside, loopback), trusted=False)
    assert "reached-" not in output, output
    assert outside.hits[before:] == [] and loopback.hits == []
    refused = [e for e in logs if e["event"] == "setup_network_refused"]
    assert [e["reason"] for e in refused] == ["untrusted_head"]


def test_checks_and_run_command_never_get_a_network(
    workspace: Workspace, outside: StandIn, loopback: StandIn
) -> None:
    before = len(outside.hits)
    fetch = _fetch(outside, loopback)
    checks = RepoChecks(setup=("true",), checks=(fetch,), setup_network=True)
    session = CommandSession(Jail(limits=small_limits()), workspace, checks, head_trusted=True)
    try:
        reports = session.run_checks()
        tool = run_command_tool(session, COUNTER, 4000)
        result = tool.run(tool.args(command=fetch), ToolCall("c1", "run_command", "{}"))
    finally:
        session.close()
    assert "reached-" not in reports[0].last_lines and "reached-" not in result.content
    assert "Network is unreachable" in result.content
    assert outside.hits[before:] == [] and loopback.hits == []


def test_link_local_is_unreachable_and_dns_is_slirps_forwarder(tmp_path: Path) -> None:
    jail = Jail(limits=small_limits())
    work = jail.work_copy(tmp_path, {})
    try:
        result = jail.run(
            'cat /etc/resolv.conf; python3 -c "import socket\n'
            "try: socket.create_connection(('169.254.169.254', 80), 5)\n"
            "except OSError as e: print('metadata', e.errno)\"",
            work,
            network=True,
        )
    finally:
        work.remove()
    output = text(result)
    assert output.splitlines()[0] == "nameserver 10.0.2.3", output
    assert "metadata 113" in output  # EHOSTUNREACH: the unreachable route, not a time-out


def test_slirp_ends_with_the_command_also_on_a_time_out(tmp_path: Path) -> None:
    jail = Jail(limits=small_limits(timeout_seconds=3))
    work = jail.work_copy(tmp_path, {})
    try:
        done = jail.run("echo up", work, network=True)
        assert done.ok and text(done).strip() == "up"
        assert standins.children_named("slirp4netns") == []
        late = jail.run("sleep 60", work, network=True)
        assert late.timed_out
        assert standins.children_named("slirp4netns") == []
    finally:
        work.remove()


def test_slirp_and_the_copys_filesystem_end_when_the_daemon_dies(tmp_path: Path) -> None:
    marker = f"{400 + os.getpid() % 1000}.{time.monotonic_ns() % 10**9}"
    script = tmp_path / "parent.py"
    script.write_text(
        "from pathlib import Path\n"
        "from bot.jail import Jail\n"
        "jail = Jail()\n"
        f"work = jail.work_copy(Path({str(tmp_path)!r}), {{}})\n"
        f"jail.run('sleep {marker}', work, network=True)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], cwd=Path(__file__).parents[2])
    try:
        deadline = time.monotonic() + 30
        while not (helpers := _helpers(parent.pid)) or not _sleeping(marker):
            assert time.monotonic() < deadline, "the networked command never started"
            time.sleep(0.1)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() and not _zombie(pid) for pid in helpers):
            assert time.monotonic() < deadline, "slirp4netns or the holder outlived the daemon"
            time.sleep(0.1)
        while _sleeping(marker):
            assert time.monotonic() < deadline, "the jailed command outlived the daemon"
            time.sleep(0.1)
    finally:
        parent.kill()
        subprocess.run(["pkill", "-f", f"sleep {marker}"], check=False)


def _helpers(parent: int) -> list[int]:
    """slirp4netns and the working copy's holder, once both run."""
    slirp = standins.children_named("slirp4netns", parent)
    holder = [
        pid
        for name in ("python3", "python3.11", "python")
        for pid in standins.children_named(name, parent)
    ]
    return slirp + holder if slirp and holder else []


def _sleeping(marker: str) -> bool:
    found = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, check=False)
    return found.returncode == 0


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


# -- as an unprivileged daemon ----------------------------------------------------------------

NON_ROOT = """
import json, sys, tempfile
from pathlib import Path
from bot.jail import Jail
from bot.jail.limits import JailLimits
MIB = 1024 * 1024
jail = Jail(limits=JailLimits(timeout_seconds=20, disk_bytes=32 * MIB, max_file_bytes=24 * MIB))
limits = jail.host_limits()
work = jail.work_copy(Path(tempfile.mkdtemp()), {})
try:
    net = jail.run(sys.argv[1], work, network=True)
    full = jail.run("dd if=/dev/zero of=a bs=1M count=20; dd if=/dev/zero of=b bs=1M count=20",
                    work)
finally:
    work.remove()
print(json.dumps({"limits": limits, "net": net.output(9000), "full": full.output(9000)}))
"""


def test_networking_and_the_disk_bound_as_an_unprivileged_daemon(
    tmp_path: Path, outside: StandIn, loopback: StandIn
) -> None:
    """The production daemons are not root (DynamicUser, the image's uid 10001). As root the
    test runs the daemon's side as `nobody`, in a mount namespace of its own where
    /dev/net/tun has Debian's usual mode (0666) whatever this machine gave it."""
    if os.geteuid() != 0 or not Path("/dev/net/tun").exists():
        pytest.skip("needs root (to become another user) and /dev/net/tun")
    python = _system_python()
    env = _nobody_env()
    preflight = _as_nobody(python, ["-c", "import bot.jail, pathspec, structlog"], env, tmp_path)
    if preflight.returncode != 0:
        pytest.skip(f"nobody cannot import the project here: {preflight.stderr[-200:]}")
    before = len(outside.hits)
    done = _as_nobody(python, ["-c", NON_ROOT, _fetch(outside, loopback)], env, tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["limits"]["disk_mode"] == "tmpfs"
    assert "reached-outside" in report["net"], report["net"]
    assert "reached-loopback" not in report["net"] and "reached-gateway" not in report["net"]
    assert outside.hits[before:] == ["hit /outside"] and loopback.hits == []
    assert "No space left on device" in report["full"]


def _system_python() -> str:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{version}", f"/usr/local/bin/{version}", sys.executable):
        if os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("no Python that another user may run")


def _nobody_env() -> dict[str, str]:
    paths = [*site.getsitepackages(), str(Path(__file__).parents[2])]
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONPATH": ":".join(paths)}


def _as_nobody(
    python: str, args: list[str], env: dict[str, str], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    devices = Path(tempfile.mkdtemp(prefix="bot-tun-"))
    try:
        script = (
            f"mount -t tmpfs -o mode=0755 tmpfs {devices} && mknod -m 0666 {devices}/tun c 10 200"
            f" && mount --bind {devices}/tun /dev/net/tun"
            ' && exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"'
        )
        return subprocess.run(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                "sh",
                python,
                *args,
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd="/",
            timeout=120,
            check=False,
        )
    finally:
        shutil.rmtree(devices, ignore_errors=True)
