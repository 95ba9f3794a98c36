"""The jail: bubblewrap around one command over a working copy, as an unprivileged user."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.jail.bwrap import bwrap_argv, jail_env
from bot.jail.limits import JailLimits
from bot.jail.process import CommandResult, run_bounded
from bot.jail.workcopy import WorkCopy

POOL_SIZE = 64


class _UidPool:
    """One unprivileged uid per working copy (so per task): a fork bomb exhausts only its own
    task's RLIMIT_NPROC, and files one task's commands write are not another's."""

    def __init__(self, base: int, size: int = POOL_SIZE) -> None:
        self._free = list(range(base + size - 1, base - 1, -1))
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            if not self._free:
                raise JailUnavailable("every jail uid is in use; too many working copies at once")
            return self._free.pop()

    def give_back(self, uid: int) -> None:
        with self._lock:
            self._free.append(uid)


class JailUnavailable(Exception):
    """bubblewrap is missing or cannot create namespaces here; the message says how to fix it."""


@dataclass(frozen=True)
class Jail:
    bwrap: str = "bwrap"
    limits: JailLimits = field(default_factory=JailLimits)
    env: Mapping[str, str] = field(default_factory=dict)
    read_only: Sequence[Path] = ()
    # When the daemon runs as root, commands run as unprivileged uids from this block (rlimits
    # on processes do not bind root, and root in the jail is more than a command needs).
    uid_base: int = 1_000_000_000
    work_parent: Path | None = None  # where working copies are made (default: the temp dir)
    _uids: _UidPool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_uids", _UidPool(self.uid_base))

    @property
    def as_root(self) -> bool:
        return os.geteuid() == 0

    def work_copy(
        self,
        snapshot: Path,
        changes: Mapping[str, str | None],
        links: Mapping[str, str] | None = None,
        executables: Iterable[str] = (),
    ) -> WorkCopy:
        if not self.as_root:
            return WorkCopy.create(
                snapshot, changes, self.work_parent, links=links, executables=executables
            )
        uid = self._uids.take()
        try:
            return WorkCopy.create(
                snapshot,
                changes,
                self.work_parent,
                (uid, uid),
                lambda: self._uids.give_back(uid),
                links=links,
                executables=executables,
            )
        except BaseException:
            self._uids.give_back(uid)
            raise

    def run(self, command: str, work: WorkCopy, *, network: bool = False) -> CommandResult:
        argv = bwrap_argv(
            self._bwrap_path(),
            work.root,
            command,
            limits=self.limits,
            env=jail_env(self.env),
            network=network,
            read_only=self.read_only,
        )
        owner = work.owner
        return run_bounded(
            argv,
            command=command,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            timeout=self.limits.timeout_seconds,
            max_output_bytes=self.limits.max_output_bytes,
            user=owner[0] if owner else None,
            group=owner[1] if owner else None,
        )

    def _bwrap_path(self) -> str:
        found = shutil.which(self.bwrap)
        if found is None:
            raise JailUnavailable(_MISSING.format(bwrap=self.bwrap))
        return found


_MISSING = (
    "bubblewrap ({bwrap}) is not installed: install the package `bubblewrap` "
    "(apt-get install bubblewrap), or set jail.enabled: false"
)
_REFUSED = (
    "bubblewrap cannot create its namespaces here ({reason}): allow unprivileged user "
    "namespaces (sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0; "
    "in a container: a seccomp profile that permits unshare/clone of namespaces; under "
    "systemd: see systemd/README.md), or set jail.enabled: false"
)


def probe(jail: Jail) -> None:
    """Raise JailUnavailable with the fix unless a trivial command runs in the jail."""
    snapshot = Path(tempfile.mkdtemp(prefix="bot-probe-"))
    try:
        work = jail.work_copy(snapshot, {})
        try:
            result = jail.run("echo jail-ok", work)
        finally:
            work.remove()
    finally:
        shutil.rmtree(snapshot, ignore_errors=True)
    if not result.ok or "jail-ok" not in result.tail + result.head:
        reason = (result.head + result.tail).strip().splitlines()[-1:] or [result.outcome]
        raise JailUnavailable(_REFUSED.format(reason=reason[0][:200]))
