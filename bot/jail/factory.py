"""The jail the configuration asks for, and the start-up check that it can work here."""

from __future__ import annotations

import shutil

from bot.config import ConfigError, JailSettings
from bot.jail.jail import Jail, JailUnavailable, probe
from bot.jail.limits import MIB, JailLimits


def build_jail(settings: JailSettings) -> Jail | None:
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
    )
    return Jail(
        bwrap=settings.bwrap,
        limits=limits,
        env=dict(settings.env),
        read_only=settings.read_only_paths,
        uid_base=settings.uid_base,
        work_parent=settings.work_dir,
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
    return None
