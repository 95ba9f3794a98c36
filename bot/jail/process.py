"""Run one command with a wall-clock deadline and bounded output, whatever it does.

The output is read as it comes (a command that prints 100 MB must not fill our memory): the
first and last few KiB are kept, the rest is counted. Past the deadline or the output limit
the process group is killed with SIGKILL; bubblewrap's PID namespace then takes every process
of the jail with it.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

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

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def outcome(self) -> str:
        if self.timed_out:
            return "timed out (killed)"
        if self.output_limit_hit:
            return "output limit reached (killed)"
        if self.signal is not None:
            return f"killed by {_signal_name(self.signal)}"
        return "passed" if self.ok else f"failed (exit status {self.exit_status})"

    def output(self, max_chars: int) -> str:
        """What the command printed, its end kept when it must be cut."""
        whole = self.output_bytes <= HEAD_BYTES + TAIL_BYTES
        text = self.head + self.tail if whole else f"{self.head}\n[...]\n{self.tail}"
        if len(text) <= max_chars:
            return text
        return "[...]\n" + text[-max_chars:]


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
    user: int | None = None,
    group: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> CommandResult:
    started = clock()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env),  # not inherited: bubblewrap's own /proc/1/environ is visible inside
        start_new_session=True,
        user=user,
        group=group,
        extra_groups=[] if user is not None else None,
        close_fds=True,
    )
    capture = _Capture(max_output_bytes, bytearray(), bytearray())
    deadline = started + timeout
    with proc:  # closes the pipe
        timed_out = _pump(proc, capture, deadline, clock)
        if not timed_out and not capture.over:
            try:  # output closed, but the command may still run (e.g. `exec >&-; sleep 1e9`)
                proc.wait(timeout=max(0.0, deadline - clock()))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out or capture.over:
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
    )


def _pump(
    proc: subprocess.Popen[bytes], capture: _Capture, deadline: float, clock: Callable[[], float]
) -> bool:
    """Read until EOF; True if the deadline came first. Stops early past the output limit."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while not capture.over:
            remaining = deadline - clock()
            if remaining <= 0:
                return True
            if not selector.select(timeout=min(remaining, 1.0)):
                continue
            chunk = os.read(fd, _READ)
            if not chunk:
                return False
            capture.add(chunk)
    return False


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
