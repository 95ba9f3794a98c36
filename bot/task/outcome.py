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
    SETTLED = "settled"  # a finished task: only its owed closing comment or labels were made good
    # A finished task with nothing owed: the job was planned before it finished (by this daemon
    # or another). Logged as `job_stale`, never as a `task_outcome`: this daemon did not work it.
    NOTHING = "nothing"
