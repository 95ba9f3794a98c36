"""Run as its own process: `python -I _holder.py DIR BYTES UID GID`. Holds a size-limited
tmpfs mounted on DIR for one working copy, in a mount namespace of its own (and, unless run
as root, a user namespace of its own, where an unprivileged daemon may mount). The host's
DIR stays empty; the daemon reaches the files as /proc/<pid>/root/DIR and commands enter the
namespace. Prints `ready` once mounted, then waits for its standard input to close: when the
daemon removes the copy or dies, the process ends and the kernel frees the filesystem.
Standard library only, single-threaded (unshare of a user namespace refuses threads).
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), what)


def mount_tmpfs(path: str, size: int, uid: int, gid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    me, group = os.geteuid(), os.getegid()
    _check(libc.unshare(CLONE_NEWNS | (0 if me == 0 else CLONE_NEWUSER)), "unshare")
    if me != 0:  # ourselves, and only ourselves, inside
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{me} {me} 1"),
            ("gid_map", f"{group} {group} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    # Nothing mounted here propagates to the host's namespace.
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    options = f"size={size},nr_inodes={max(4096, size // 4096)},mode=0700,uid={uid},gid={gid}"
    _check(
        libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options.encode()),
        "mount tmpfs",
    )


def main(argv: list[str]) -> int:
    try:
        mount_tmpfs(argv[1], int(argv[2]), int(argv[3]), int(argv[4]))
    except OSError as exc:
        print(f"error: {exc}", flush=True)
        return 1
    print("ready", flush=True)
    sys.stdin.buffer.read()  # until the daemon closes it, or dies
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
