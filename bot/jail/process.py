"""Run one command with a wall-clock deadline and bounded output, whatever it does.

The output is read as it comes (a command that prints 100 MB must not fill our memory): the
first and last few KiB are kept, the rest is counted. Past the deadline or the output limit
the process group is killed with SIGKILL; bubblewrap's PID namespace then takes every process
of the jail with it. A `Launch` adds what some runs need: descriptors bubblewrap reads, work
done once it has started (the network is attached then), and a watch that can stop it.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bot.core.clock import SYSTEM_CLOCK

HEAD_BYTES = 4 * 1024
TAIL_BYTES = 32 * 1024
_READ = 65536


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_status: int | None  # None when ended by a signal
    signal: int | None
    duration: float
    head: str
    tail: str
    output_bytes: int  # everything the command wrote to stdout and stderr
    timed_out: bool = False
    output_limit_hit: bool = False
    stopped: str | None = None  # why a watch or the launch stopped it (the disk limit, ...)

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def outcome(self) -> str:
        if self.timed_out:
            return "timed out (killed)"
        if self.output_limit_hit:
            return "output limit reached (killed)"
        if self.stopped is not None:
            return f"{self.stopped} (killed)" if self.signal else f"not run: {self.stopped}"
        if self.signal is not None:
            return f"killed by {_signal_name(self.signal)}"
        return "passed" if self.ok else f"failed (exit status {self.exit_status})"

    @classmethod
    def not_run(cls, command: str, reason: str) -> CommandResult:
        text = f"{reason}\n"
        return cls(command, None, None, 0.0, text, "", len(text), stopped=reason)

    def output(self, max_chars: int) -> str:
        """What the command printed, its end kept when it must be cut."""
        whole = self.output_bytes <= HEAD_BYTES + TAIL_BYTES
        text = self.head + self.tail if whole else f"{self.head}\n[...]\n{self.tail}"
        if len(text) <= max_chars:
            return text
        return "[...]\n" + text[-max_chars:]


class LaunchFailed(Exception):
    """What `Launch.started` raises when the command cannot go on; the message says why."""


@dataclass(frozen=True)
class Launch:
    pass_fds: tuple[int, ...] = ()
    # Called with the process and the deadline once it runs; raises LaunchFailed to have it
    # killed.
    started: Callable[[subprocess.Popen[bytes], float], None] | None = None
    # Called about once a second while it runs; a reason stops it.
    watch: Callable[[], str | None] | None = None
    finished: Callable[[], None] | None = None  # after it ended, whatever happened


WATCH_SECONDS = 1.0


@dataclass
class _Capture:
    limit: int
    head: bytearray
    tail: bytearray
    total: int = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = HEAD_BYTES - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > TAIL_BYTES:
            del self.tail[: len(self.tail) - TAIL_BYTES]

    @property
    def over(self) -> bool:
        return self.total > self.limit


def run_bounded(
    argv: Sequence[str],
    *,
    command: str,
    env: Mapping[str, str],
    timeout: float,
    max_output_bytes: int,
    launch: Launch | None = None,
    clock: Callable[[], float] = SYSTEM_CLOCK.monotonic,
) -> CommandResult:
    launch = launch or Launch()
    started = clock()
    try:
        return _run(argv, command, env, started + timeout, max_output_bytes, launch, clock)
    finally:
        if launch.finished is not None:
            launch.finished()


def _run(
    argv: Sequence[str],
    command: str,
    env: Mapping[str, str],
    deadline: float,
    max_output_bytes: int,
    launch: Launch,
    clock: Callable[[], float],
) -> CommandResult:
    started = clock()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env),  # not inherited: bubblewrap's own /proc/1/environ is visible inside
        start_new_session=True,
        close_fds=True,
        pass_fds=launch.pass_fds,
        cwd="/",  # not the daemon's (the state dir): nothing of it is reachable
    )
    capture = _Capture(max_output_bytes, bytearray(), bytearray())
    stopped: str | None = None
    with proc:  # closes the pipe
        try:
            if launch.started is not None:
                launch.started(proc, deadline)
        except LaunchFailed as exc:
            stopped = str(exc)
            capture.add(f"{exc}\n".encode())
        if stopped is None:
            timed_out, stopped = _pump(proc, capture, deadline, clock, launch.watch)
        else:
            timed_out = False
        if not timed_out and not capture.over and stopped is None:
            # Output closed, but the command may still run (e.g. `exec >&-; sleep 1e9`).
            timed_out, stopped = _wait(proc, deadline, clock, launch.watch)
        if timed_out or capture.over or stopped is not None:
            _kill(proc)
        status = proc.wait()
    return CommandResult(
        command=command,
        exit_status=status if status >= 0 else None,
        signal=-status if status < 0 else None,
        duration=clock() - started,
        head=capture.head.decode("utf-8", errors="replace"),
        tail=capture.tail.decode("utf-8", errors="replace"),
        output_bytes=capture.total,
        timed_out=timed_out,
        output_limit_hit=capture.over,
        stopped=stopped,
    )


def _pump(
    proc: subprocess.Popen[bytes],
    capture: _Capture,
    deadline: float,
    clock: Callable[[], float],
    watch: Callable[[], str | None] | None,
) -> tuple[bool, str | None]:
    """Read until EOF: (the deadline came first, why a watch stopped it). Stops early past the
    output limit."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    next_watch = clock() + WATCH_SECONDS
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while not capture.over:
            now = clock()
            if now >= deadline:
                return True, None
            if watch is not None and now >= next_watch:
                next_watch = now + WATCH_SECONDS
                reason = watch()
                if reason is not None:
                    return False, reason
            if not selector.select(timeout=min(deadline - now, WATCH_SECONDS)):
                continue
            chunk = os.read(fd, _READ)
            if not chunk:
                return False, None
            capture.add(chunk)
    return False, None


def _wait(
    proc: subprocess.Popen[bytes],
    deadline: float,
    clock: Callable[[], float],
    watch: Callable[[], str | None] | None,
) -> tuple[bool, str | None]:
    while True:
        remaining = deadline - clock()
        if remaining <= 0:
            return True, None
        try:
            proc.wait(timeout=min(remaining, WATCH_SECONDS))
            return False, None
        except subprocess.TimeoutExpired:
            reason = watch() if watch is not None else None
            if reason is not None:
                return False, reason


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
