"""Where a working copy lives, and what bounds the bytes commands can write into it.

`tmpfs` (the real bound): the copy is a tmpfs of `disk_bytes`, mounted in a mount namespace
of a small holder process of its own (`_holder.py`; as an unprivileged daemon also in a user
namespace, so no privilege is needed beyond what bubblewrap needs). A command that fills it
gets ENOSPC, and the host's disk is untouched: the filesystem is memory (and swap), freed by
the kernel when the holder ends, which it does when the copy is removed or the daemon dies.
The daemon reaches the files through /proc/<holder>/root; commands enter the holder's
namespaces (`nsenter`) before bubblewrap.

`watchdog` (the fallback, where the holder cannot mount: no user namespaces for the daemon
outside bubblewrap, a seccomp profile that refuses mount): the copy is a plain directory, its
size is measured about once a second while a command runs, and the command is killed past
`disk_bytes`. Weaker: between two measurements a command writes at disk speed.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

_HOLDER = Path(__file__).with_name("_holder.py")
_HOLDER_SECONDS = 10.0
STOPPED = "disk limit reached"


class DiskMode(Enum):
    TMPFS = "tmpfs"
    WATCHDOG = "watchdog"


class HolderFailed(Exception):
    """The size-limited filesystem could not be made here; the message says why."""


@dataclass
class Area:
    """A working copy's directory: `root` is the daemon's way to it, `jail_root` the path
    that commands see (in the holder's mount namespace), `enter` what puts a command there
    (and, as root, makes it the copy's unprivileged user)."""

    root: Path
    jail_root: Path
    mode: DiskMode
    limit: int
    run_as: tuple[int, int] | None
    _holder: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def enter(self) -> list[str]:
        if self._holder is not None:
            argv = ["nsenter", f"--target={self._holder.pid}", "--mount"]
            if self.run_as is None:  # our own user namespace, as ourselves
                return [*argv, "--user", "--preserve-credentials", "--"]
            uid, gid = self.run_as  # nsenter drops supplementary groups with --setgid
            return [*argv, f"--setuid={uid}", f"--setgid={gid}", "--"]
        if self.run_as is None:
            return []
        uid, gid = self.run_as
        return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]

    def over_limit(self) -> str | None:
        """The watchdog: a reason to stop the command when the copy has grown past the
        limit (a tmpfs needs none: the kernel refuses the write)."""
        if self.mode is not DiskMode.WATCHDOG:
            return None
        used = usage(self.root)
        if used > self.limit:
            return f"{STOPPED}: the working copy holds {used} bytes, over {self.limit}"
        return None

    def release(self) -> None:
        if self._holder is None:
            _remove_tree(self.root)
            return
        holder, self._holder = self._holder, None
        _stop(holder)  # the kernel frees the filesystem and everything in it
        with contextlib.suppress(OSError):
            self.jail_root.rmdir()


def make_area(
    parent: Path | None, limit: int, run_as: tuple[int, int] | None, mode: DiskMode
) -> Area:
    """A fresh directory of the given mode; HolderFailed when tmpfs cannot be had here."""
    place = Path(tempfile.mkdtemp(prefix="bot-work-", dir=parent))
    if mode is DiskMode.WATCHDOG:
        return Area(place, place, mode, limit, run_as)
    try:
        holder = _start_holder(place, limit, run_as)
    except BaseException:
        place.rmdir()
        raise
    root = Path(f"/proc/{holder.pid}/root") / place.relative_to("/")
    return Area(root, place, mode, limit, run_as, holder)


def _start_holder(
    place: Path, limit: int, run_as: tuple[int, int] | None
) -> subprocess.Popen[bytes]:
    uid, gid = run_as or (os.geteuid(), os.getegid())
    # Lives as long as the working copy: Area.release ends it.
    holder = subprocess.Popen(
        [sys.executable, "-I", str(_HOLDER), str(place), str(limit), str(uid), str(gid)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        cwd="/",
        start_new_session=True,  # out of reach of the commands' process group kill
    )
    assert holder.stdout is not None
    line = _first_line(holder)
    if line != "ready":
        _stop(holder)
        raise HolderFailed(line or "the holder process ended without a word")
    return holder


def _first_line(holder: subprocess.Popen[bytes]) -> str:
    assert holder.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(holder.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=_HOLDER_SECONDS):
            return "the holder process did not answer in time"
    return holder.stdout.readline(4096).decode("utf-8", "replace").strip()


def _stop(holder: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        if holder.stdin is not None:
            holder.stdin.close()
    try:
        holder.wait(timeout=_HOLDER_SECONDS)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.wait()
    if holder.stdout is not None:
        holder.stdout.close()


def usage(root: Path) -> int:
    """Bytes the tree holds (allocated blocks), however deep, never following links."""
    total = 0
    stack = [str(root)]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += info.st_blocks * 512
            if stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)
    return total


def _remove_tree(root: Path) -> None:
    try:
        shutil.rmtree(root, ignore_errors=True)
    except RecursionError:  # a tree deeper than Python's recursion limit
        subprocess.run(["rm", "-rf", "--", str(root)], check=False)
