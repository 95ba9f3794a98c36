"""The jail: bubblewrap around one command over a working copy, as an unprivileged user.

What each command is run under, outermost first: the task's cgroup (where one is delegated,
bot.jail.cgroup), the working copy's mount namespace (its size-limited filesystem,
bot.jail.disk) and, as root, the copy's unprivileged uid; then prlimit and bubblewrap; for a
networked setup step, slirp4netns beside it (bot.jail.network).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.log import get_logger
from bot.jail.bwrap import bwrap_argv, jail_env
from bot.jail.cgroup import TaskCgroups, join_argv
from bot.jail.disk import Area, DiskMode, HolderFailed, make_area
from bot.jail.limits import JailLimits
from bot.jail.network import MISSING as SLIRP_MISSING
from bot.jail.network import SLIRP, SlirpAttachment, slirp_path
from bot.jail.process import CommandResult, Launch, run_bounded
from bot.jail.workcopy import WorkCopy

log = get_logger(__name__)
_REASONS = {
    DiskMode.TMPFS: "a size-limited tmpfs per working copy",
    DiskMode.WATCHDOG: "the working copy's size is measured while commands run",
}
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


@dataclass(frozen=True)
class ServerLaunch:
    """A jailed long-lived program: its command line, and the whole environment to start it
    with (bubblewrap passes it through to the program)."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(repr=False)


class JailUnavailable(Exception):
    """bubblewrap is missing or cannot create namespaces here; the message says how to fix it."""


class _Host:
    """What this host offers, found out once per jail (the first working copy)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.disk: tuple[DiskMode, str] | None = None
        self._cgroups: tuple[TaskCgroups | None, str] | None = None

    def settle_disk(self, mode: DiskMode, reason: str) -> None:
        """The first working copy's mode holds for the jail; a copy that later falls back
        (the tmpfs worked at start, not this time) is only logged."""
        with self._lock:
            before = self.disk
            if before is None:
                self.disk = (mode, reason)
        if before is not None and before[0] is not mode:
            log.warning("jail_disk_fallback", mode=mode.value, reason=reason)

    def cgroups(self) -> tuple[TaskCgroups | None, str]:
        with self._lock:
            if self._cgroups is None:
                self._cgroups = TaskCgroups.detect()
            return self._cgroups


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
    slirp: str = SLIRP  # user-mode networking for networked setup steps
    # How working copies are bounded, best first: the next is used where one cannot work.
    disk_modes: tuple[DiskMode, ...] = (DiskMode.TMPFS, DiskMode.WATCHDOG)
    # A command's deadline and its duration; the network's start-up shares the deadline.
    clock: Clock = field(default=SYSTEM_CLOCK, repr=False, compare=False)
    _uids: _UidPool = field(init=False, repr=False, compare=False)
    _host: _Host = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_uids", _UidPool(self.uid_base))
        object.__setattr__(self, "_host", _Host())

    @property
    def as_root(self) -> bool:
        return os.geteuid() == 0

    def host_limits(self) -> dict[str, str | bool]:
        """How working copies and tasks are bounded on this host (for the start-up log)."""
        if self._host.disk is None:
            scratch = Path(tempfile.mkdtemp(prefix="bot-probe-"))
            try:
                self.work_copy(scratch, {}).remove()
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        assert self._host.disk is not None
        mode, reason = self._host.disk
        cgroups, why = self._host.cgroups()
        return {
            "disk_mode": mode.value,
            "disk_reason": reason,
            "task_cgroups": cgroups is not None,
            "cgroups_reason": why,
        }

    def work_copy(
        self,
        snapshot: Path,
        changes: Mapping[str, str | None],
        links: Mapping[str, str] | None = None,
        executables: Iterable[str] = (),
        hidden: Collection[str] = (),
    ) -> WorkCopy:
        """A working copy of `snapshot` (less its `hidden` bookkeeping files) with `changes`."""
        uid = self._uids.take() if self.as_root else None
        owner = (uid, uid) if uid is not None else None
        cgroup: Path | None = None
        try:
            cgroup = self._cgroup()
            area = self._area(owner)
        except BaseException:
            self._release(uid, cgroup)
            raise
        return WorkCopy.create(
            snapshot,
            changes,
            area,
            owner,
            lambda: self._release(uid, cgroup),
            links=links,
            executables=executables,
            cgroup=cgroup,
            hidden=hidden,
        )

    def run(self, command: str, work: WorkCopy, *, network: bool = False) -> CommandResult:
        attachment: SlirpAttachment | None = None
        if network:
            slirp = slirp_path(self.slirp)
            if slirp is None:
                return CommandResult.not_run(command, SLIRP_MISSING)
            attachment = SlirpAttachment(slirp, self.clock.monotonic)
        prefix = join_argv(work.cgroup) if work.cgroup is not None else []
        argv = prefix + work.area.enter()
        argv += bwrap_argv(
            self._bwrap_path(),
            work.area.jail_root,
            command,
            limits=self.limits,
            env=jail_env(self.env),
            network=attachment.bwrap_options() if attachment else (),
            read_only=self.read_only,
        )
        launch = Launch(
            pass_fds=attachment.pass_fds if attachment else (),
            started=attachment.attach if attachment else None,
            watch=work.area.over_limit if work.area.mode is DiskMode.WATCHDOG else None,
            finished=attachment.close if attachment else None,
        )
        return run_bounded(
            argv,
            command=command,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            timeout=self.limits.timeout_seconds,
            max_output_bytes=self.limits.max_output_bytes,
            launch=launch,
            clock=self.clock.monotonic,
        )

    def server_launch(
        self, program: Sequence[str], work: WorkCopy, env: Mapping[str, str], *, read_only: bool
    ) -> ServerLaunch:
        """How to start a long-lived program over `work` (an MCP server speaking on its stdin
        and stdout): the same jail as `run`'s commands, never a network, its whole environment
        `env` on the fixed base, given as the process environment (bubblewrap passes it
        through; no value on a command line). The caller owns the process; bubblewrap's
        `--die-with-parent` ends it with the daemon. The disk watchdog does not watch it."""
        prefix = join_argv(work.cgroup) if work.cgroup is not None else []
        argv = (
            prefix
            + work.area.enter()
            + bwrap_argv(
                self._bwrap_path(),
                work.area.jail_root,
                "",
                limits=self.limits,
                env=None,
                read_only=self.read_only,
                program=program,
                work_read_only=read_only,
            )
        )
        return ServerLaunch(tuple(argv), jail_env(env))

    def _area(self, owner: tuple[int, int] | None) -> Area:
        settled = self._host.disk
        # Where the tmpfs did not work for the first copy, it is not tried for every other.
        fallen = settled is not None and settled[0] is not self.disk_modes[0]
        modes = self.disk_modes[-1:] if fallen else self.disk_modes
        limit = self.limits.disk_bytes
        failure = ""
        for mode in modes[:-1]:
            try:
                area = make_area(self.work_parent, limit, owner, mode)
            except (HolderFailed, OSError) as exc:
                failure = f"no size-limited tmpfs here ({exc}): "
                continue
            self._host.settle_disk(mode, _REASONS[mode])
            return area
        area = make_area(self.work_parent, limit, owner, modes[-1])
        self._host.settle_disk(modes[-1], failure + _REASONS[modes[-1]])
        return area

    def _cgroup(self) -> Path | None:
        cgroups, _ = self._host.cgroups()
        if cgroups is None:
            return None
        try:
            return cgroups.create(self.limits.task_memory_bytes, self.limits.max_processes)
        except OSError as exc:
            log.warning("jail_cgroup_failed", error=exc.strerror or str(exc))
            return None

    def _release(self, uid: int | None, cgroup: Path | None) -> None:
        try:
            cgroups = self._host.cgroups()[0] if cgroup is not None else None
            if cgroups is not None and cgroup is not None:
                cgroups.remove(cgroup)
        finally:
            if uid is not None:  # the uid goes back to the pool whatever happened
                self._uids.give_back(uid)

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
    result = _try(jail, network=False)
    if result is not None:
        raise JailUnavailable(_REFUSED.format(reason=result))


def probe_network(jail: Jail) -> None:
    """Raise JailUnavailable with the fix unless a networked command runs in the jail."""
    if slirp_path(jail.slirp) is None:
        raise JailUnavailable(SLIRP_MISSING)
    result = _try(jail, network=True)
    if result is not None:
        raise JailUnavailable(f"networked setup cannot work here: {result}")


def _try(jail: Jail, *, network: bool) -> str | None:
    """None when `echo` ran in the jail, else the reason it did not."""
    snapshot = Path(tempfile.mkdtemp(prefix="bot-probe-"))
    try:
        work = jail.work_copy(snapshot, {})
        try:
            result = jail.run("echo jail-ok", work, network=network)
        finally:
            work.remove()
    finally:
        shutil.rmtree(snapshot, ignore_errors=True)
    if result.ok and "jail-ok" in result.tail + result.head:
        return None
    reason = (result.head + result.tail).strip().splitlines()[-1:] or [result.outcome]
    return reason[0][:200]
