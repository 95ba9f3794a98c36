"""How a worker's run of a task ended, and why it stopped early when it did."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    DONE = "done"
    FAILED = "failed"
    PAUSED = "paused"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"  # daemon stopping or a transient fault: resumes later
    IGNORED = "ignored"  # started by someone who may not control the bot: nothing done
