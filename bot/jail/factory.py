"""The jail the configuration asks for, and the start-up check that it can work here."""

from __future__ import annotations

import shutil

from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.config import ConfigError, JailSettings
from bot.jail.jail import Jail, JailUnavailable, probe, probe_network
from bot.jail.limits import MIB, JailLimits


def build_jail(settings: JailSettings, clock: Clock = SYSTEM_CLOCK) -> Jail | None:
    if not settings.enabled:
        return None
    limits = JailLimits(
        timeout_seconds=settings.timeout_seconds,
        cpu_seconds=settings.cpu_seconds,
        memory_bytes=settings.memory_mb * MIB,
        max_processes=settings.max_processes,
        max_file_bytes=settings.max_file_mb * MIB,
        max_output_bytes=settings.max_output_mb * MIB,
        tmp_bytes=settings.tmp_mb * MIB,
        disk_bytes=settings.disk_mb * MIB,
        task_memory_bytes=settings.task_memory_mb * MIB,
    )
    return Jail(
        bwrap=settings.bwrap,
        limits=limits,
        env=dict(settings.env),
        read_only=settings.read_only_paths,
        uid_base=settings.uid_base,
        work_parent=settings.work_dir,
        slirp=settings.slirp4netns,
        clock=clock,
    )


def jail_problem(settings: JailSettings) -> ConfigError | None:
    """None when the configured jail works on this host, else the error naming the key."""
    jail = build_jail(settings)
    if jail is None:
        return None
    try:
        probe(jail)
    except JailUnavailable as exc:
        key = "jail.bwrap" if shutil.which(settings.bwrap) is None else "jail.enabled"
        return ConfigError(key, str(exc))
    networked = network_key(settings)
    if networked is not None:
        try:
            probe_network(jail)
        except JailUnavailable as exc:
            return ConfigError(networked, str(exc))
    return None


def network_key(settings: JailSettings) -> str | None:
    """The first key that asks for networked setup, if any does."""
    for name, checks in sorted(settings.repositories.items()):
        if checks.setup_network:
            return f"jail.repositories.{name}.setup_network"
    if settings.allow_repo_setup_network:
        return "jail.allow_repo_setup_network"
    return None
