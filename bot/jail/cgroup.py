"""Memory and processes of a whole task, where the daemon's cgroup (v2) is delegated to it.

With systemd `Delegate=yes` the unit's cgroup is the daemon's to divide: the daemon moves its
own processes into a leaf (`daemon`), enables the memory and pids controllers for children,
and puts each working copy's commands into a child of their own (`jail-<n>`) with
`memory.max` and `pids.max`. Everything a task's commands hold counts there together,
tmpfs pages they write included. Elsewhere (no cgroup v2, not delegated, not writable) there
is none: each process is bound by RLIMIT_AS and the unit's `MemoryMax=` bounds them all.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

CONTROLLERS = ("memory", "pids")
_LEAF = "daemon"
_REMOVE_TRIES = 50


@dataclass
class TaskCgroups:
    base: Path  # the delegated cgroup (the daemon's own, before it moved into the leaf)
    _numbers: itertools.count[int] = field(default_factory=itertools.count, repr=False)

    @classmethod
    def detect(cls) -> tuple[TaskCgroups | None, str]:
        """The delegated subtree ready for use, or None and the reason there is none."""
        base, reason = _own_cgroup()
        if base is None:
            return None, reason
        missing = [c for c in CONTROLLERS if c not in _words(base / "cgroup.controllers")]
        if missing:
            return None, f"controllers not delegated: {', '.join(missing)}"
        if not all(
            os.access(base / name, os.W_OK)
            for name in ("", "cgroup.procs", "cgroup.subtree_control")
        ):
            return None, f"{base} is not writable (no Delegate=)"
        try:
            _take_over(base)
        except OSError as exc:
            return None, f"cannot divide {base}: {exc.strerror or exc}"
        return cls(base), f"per-task cgroups under {base}"

    def create(self, memory_bytes: int, max_processes: int) -> Path:
        path = self.base / f"jail-{os.getpid()}-{next(self._numbers)}"
        path.mkdir()
        try:
            (path / "memory.max").write_text(str(memory_bytes))
            (path / "pids.max").write_text(str(max_processes))
        except OSError:
            self.remove(path)
            raise
        return path

    def remove(self, path: Path) -> None:
        """Kill what is left in it, then remove it (a cgroup goes once its processes have)."""
        kill = path / "cgroup.kill"  # Linux 5.14; before it, bubblewrap's PID namespace
        with contextlib.suppress(OSError):
            if kill.exists():
                kill.write_text("1")
        for _ in range(_REMOVE_TRIES):
            try:
                path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


def join_argv(path: Path) -> list[str]:
    """An argv prefix that moves the command into `path` before anything else runs (the
    shell writes its own pid, `0`, then becomes the rest of the argv)."""
    return ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(path / "cgroup.procs")]


def _own_cgroup() -> tuple[Path | None, str]:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None, "no /proc/self/cgroup"
    unified = [line[3:] for line in lines if line.startswith("0::")]
    mount = _cgroup2_mount()
    if not unified or mount is None:
        return None, "no cgroup v2"
    if unified[0] in ("/", ""):
        return None, "the daemon is in the root cgroup (not a delegated subtree)"
    return mount / unified[0].lstrip("/"), ""


def _cgroup2_mount() -> Path | None:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4])
    return None


def _take_over(base: Path) -> None:
    """Move the daemon's processes into a leaf and enable the controllers for children (a
    cgroup with processes in it cannot give controllers to children)."""
    leaf = base / _LEAF
    leaf.mkdir(exist_ok=True)
    for pid in _words(base / "cgroup.procs"):
        with contextlib.suppress(ProcessLookupError):
            (leaf / "cgroup.procs").write_text(pid)
    (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in CONTROLLERS))


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []
