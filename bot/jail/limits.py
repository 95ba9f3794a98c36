"""Resource limits for one jailed command, applied with `prlimit` before bubblewrap starts."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class JailLimits:
    timeout_seconds: float = 300.0  # wall clock; the whole process tree is killed after it
    cpu_seconds: int = 300  # per process (RLIMIT_CPU)
    memory_bytes: int = 4096 * MIB  # address space per process (RLIMIT_AS)
    max_processes: int = 256  # for the jail's user (RLIMIT_NPROC): fork bombs stop here
    max_file_bytes: int = 512 * MIB  # any one file written (RLIMIT_FSIZE)
    max_open_files: int = 1024
    max_output_bytes: int = 16 * MIB  # stdout + stderr together; past it the command is killed
    tmp_bytes: int = 512 * MIB  # the private /tmp (a tmpfs, fresh for every command)
    disk_bytes: int = 2048 * MIB  # the working copy, all files together (bot.jail.disk)
    task_memory_bytes: int = 6144 * MIB  # a task's commands together, where cgroups allow

    def prlimit_args(self) -> list[str]:
        """`prlimit` options; prlimit sets them on itself and then execs the jail."""
        return [
            f"--cpu={self.cpu_seconds}",
            f"--as={self.memory_bytes}",
            f"--nproc={self.max_processes}",
            f"--fsize={self.max_file_bytes}",
            f"--nofile={self.max_open_files}",
            "--core=0",
        ]
