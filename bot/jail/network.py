"""A networked jail's own network: user-mode networking (slirp4netns), never the host's.

bubblewrap gives the command a new, empty network namespace and waits (`--block-fd`) while
slirp4netns attaches a tap device to it. slirp4netns runs outside, in the host's namespace,
and makes the command's connections as its own sockets: the internet and the machine's other
addresses are reachable, the host's loopback is not (`--disable-host-loopback`: 10.0.2.2 does
not lead to 127.0.0.1, and 127.0.0.1 inside is the namespace's own). Link-local addresses
(169.254.0.0/16, cloud metadata) are made unreachable inside before the command starts. DNS
goes to slirp's forwarder at 10.0.2.3, which asks the host's resolvers.

slirp4netns ends with the command: it watches a pipe (`--exit-fd`) that only the daemon holds,
closed when the command ends or the daemon dies, and is killed outright after it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bot.core.clock import SYSTEM_CLOCK
from bot.jail.process import LaunchFailed

SLIRP = "slirp4netns"
DNS = "10.0.2.3"
RESOLV_CONF = f"nameserver {DNS}\n"
NS_GET_USERNS = 0xB701
_ROUTES = Path(__file__).with_name("_netns_routes.py")
_HELPER_SECONDS = 10.0
_NOISE = ("WARNING", "child failed", "*", "Starting slirp", "seccomp:")
_TUN_HINT = (
    " (the daemon's user needs read and write access to /dev/net/tun: mode 0666, Debian's"
    " default; in Docker: --device /dev/net/tun)"
)
MISSING = (
    "networked setup needs slirp4netns (user-mode networking that cannot reach the host's "
    "loopback): install the package `slirp4netns` (apt-get install slirp4netns)"
)


def slirp_path(binary: str = SLIRP) -> str | None:
    return shutil.which(binary)


class SlirpAttachment:
    """One networked command: the descriptors bubblewrap needs, then the network once it runs.

    Use: `bwrap_options()` into the argv and `pass_fds` to the process; `attach` once it has
    started (before the deadline); `close` after it ended, whatever happened. `clock`: the
    one the deadline is on (`run_bounded`'s)."""

    def __init__(self, slirp: str, clock: Callable[[], float] = SYSTEM_CLOCK.monotonic) -> None:
        self._slirp = slirp
        self._clock = clock
        self._info_r, self._info_w = os.pipe()
        self._block_r, self._block_w = os.pipe()
        self._resolv_r, resolv_w = os.pipe()
        os.write(resolv_w, RESOLV_CONF.encode())  # a few bytes: the pipe buffer holds them
        os.close(resolv_w)
        self._exit_r, self._exit_w = os.pipe()
        self._proc: subprocess.Popen[bytes] | None = None
        # slirp4netns's messages, read if it fails; open as long as this command runs.
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115
        self._owned = [self._info_r, self._info_w, self._block_r, self._block_w]
        self._owned += [self._resolv_r, self._exit_r, self._exit_w]

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._info_w, self._block_r, self._resolv_r)

    def bwrap_options(self) -> list[str]:
        return [
            "--info-fd",
            str(self._info_w),
            "--block-fd",
            str(self._block_r),
            "--ro-bind-data",
            str(self._resolv_r),
            "/etc/resolv.conf",
        ]

    def attach(self, jail: subprocess.Popen[bytes], deadline: float) -> None:
        """Give the waiting jail its network and let it go; LaunchFailed when that fails."""
        self._close(self._info_w, self._block_r, self._resolv_r)  # the jail has its copies
        pid = _child_pid(self._info_r, deadline, self._clock)
        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            owner = fcntl.ioctl(net, NS_GET_USERNS)
        except OSError:
            os.close(net)
            raise
        try:
            self._start_slirp(net, owner, deadline)
        finally:
            os.close(net)
            os.close(owner)
        _block_link_local(pid)
        os.write(self._block_w, b"1")

    def close(self) -> None:
        self._close(self._exit_w)  # slirp4netns exits on its own when this closes
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait()
            self._proc = None
        self._errors.close()
        self._close(*self._owned)

    def _start_slirp(self, net: int, owner: int, deadline: float) -> None:
        ready_r, ready_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [
                    self._slirp,
                    "--configure",
                    "--mtu=65520",
                    "--disable-host-loopback",
                    "--enable-seccomp",
                    *(["--enable-sandbox"] if os.geteuid() == 0 else []),
                    f"--ready-fd={ready_w}",
                    f"--exit-fd={self._exit_r}",
                    "--netns-type=path",
                    f"--userns-path=/proc/self/fd/{owner}",
                    f"/proc/self/fd/{net}",
                    "tap0",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._errors,
                pass_fds=(ready_w, self._exit_r, net, owner),
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                cwd="/",
            )
            os.close(ready_w)
            ready_w = -1
            if not _readable(ready_r, deadline, self._clock) or os.read(ready_r, 1) != b"1":
                raise LaunchFailed(f"the network could not be set up: {self._slirp_error()}")
        finally:
            os.close(ready_r)
            if ready_w >= 0:
                os.close(ready_w)

    def _slirp_error(self) -> str:
        if self._proc is None:
            return "slirp4netns did not start"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        self._errors.seek(0)
        lines = self._errors.read(65536).decode("utf-8", "replace").strip().splitlines()
        useful = [line for line in lines if not line.startswith(_NOISE)]
        reason = (useful or ["slirp4netns gave no reason"])[-1][:300]
        return f"{reason}{_TUN_HINT}" if "/dev/net/tun" in reason else reason

    def _close(self, *fds: int) -> None:
        for fd in fds:
            if fd in self._owned:
                self._owned.remove(fd)
                os.close(fd)


def _child_pid(info: int, deadline: float, clock: Callable[[], float]) -> int:
    """bubblewrap's `--info-fd` JSON: the pid of the process in the new namespaces."""
    data = b""
    while True:
        if not _readable(info, deadline, clock):
            raise LaunchFailed("the jail did not start in time")
        chunk = os.read(info, 4096)
        if not chunk:
            break
        data += chunk
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError) as exc:
        raise LaunchFailed("the jail did not start (no child pid reported)") from exc


def _readable(fd: int, deadline: float, clock: Callable[[], float]) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        return bool(selector.select(timeout=max(0.0, deadline - clock())))


def _block_link_local(pid: int) -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-I", str(_ROUTES), str(pid)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_HELPER_SECONDS,
            check=False,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            cwd="/",
        )
    except subprocess.TimeoutExpired as exc:
        raise LaunchFailed("blocking link-local addresses timed out") from exc
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip()[-300:]
        raise LaunchFailed(reason or "blocking link-local addresses failed")
