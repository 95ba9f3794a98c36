"""The bubblewrap command line: what the jail sees, and nothing more.

Only system directories are mounted (read-only), plus a handful of files from /etc that
programs need to start (the dynamic linker cache, certificates, users and groups, time zone).
The daemon's configuration, state dir and credentials live elsewhere and are simply absent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from bot.jail.limits import JailLimits

WORKDIR = "/work"
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
# Top-level directories that are links into /usr on merged-/usr systems (Debian 12).
_SYSTEM_ROOTS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ETC = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "passwd",
    "group",
    "hosts",
    "mime.types",
    "python3",
    "python3.11",
)
_BASE_ENV = {"PATH": SAFE_PATH, "HOME": "/tmp", "LANG": "C.UTF-8", "TERM": "dumb", "CI": "true"}


def jail_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The command's whole environment: a fixed base plus what the configuration names."""
    return {**_BASE_ENV, **extra}


def bwrap_argv(
    bwrap: str,
    work: Path,
    command: str,
    *,
    limits: JailLimits,
    env: Mapping[str, str] | None,
    network: Sequence[str] = (),
    read_only: Sequence[Path] = (),
    program: Sequence[str] | None = None,
    work_read_only: bool = False,
) -> list[str]:
    """`network`: the options of a `SlirpAttachment` for a networked command. Every command
    gets its own network namespace (`--unshare-all`); the host's is never shared.
    `program`: an argv run as it is instead of `/bin/sh -c command` (an MCP server);
    `work_read_only`: the working copy is mounted read-only. `env` None: the environment
    bubblewrap itself is started with passes through (its caller sets it exactly), so that
    no value is on a command line, which any user of the host can read in /proc."""
    argv = ["prlimit", *limits.prlimit_args(), "--", bwrap]
    argv += ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/usr", "/usr"]
    argv += _system_roots()
    for name in _ETC:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    argv += network  # its /etc/resolv.conf names slirp's DNS forwarder
    for path in read_only:
        argv += ["--ro-bind", str(path), str(path)]
    # bwrap's /dev is a tmpfs of its own with no size (half the RAM): its device nodes stay
    # usable, but nothing may be written there; /dev/shm is a bounded tmpfs like /tmp.
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(limits.tmp_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    argv += ["--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    argv += ["--ro-bind" if work_read_only else "--bind", str(work), WORKDIR]
    # The root is bwrap's own tmpfs holding the mount points; nothing may be written there.
    argv += ["--remount-ro", "/", "--chdir", WORKDIR]
    if env is not None:
        argv.append("--clearenv")
        for key, value in sorted(env.items()):
            argv += ["--setenv", key, value]
    argv += ["--", *(program or ("/bin/sh", "-c", command))]
    return argv


def _system_roots() -> list[str]:
    args: list[str] = []
    for name in _SYSTEM_ROOTS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    return args
