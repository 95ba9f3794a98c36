"""Running commands for the agent in a bubblewrap jail.

The jail sees a working copy of the repository and the system's read-only directories, nothing
else: no state dir, no configuration, no credentials, no inherited environment, no network
unless the configuration allows it for setup steps. `Jail.run` returns a `CommandResult`
whatever the command does; the daemon and other tasks never notice.
"""

from bot.jail.jail import Jail, JailUnavailable, ServerLaunch, probe
from bot.jail.limits import JailLimits
from bot.jail.process import CommandResult
from bot.jail.workcopy import WorkCopy

__all__ = [
    "CommandResult",
    "Jail",
    "JailLimits",
    "JailUnavailable",
    "ServerLaunch",
    "WorkCopy",
    "probe",
]
