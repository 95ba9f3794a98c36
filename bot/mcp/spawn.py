"""How a stdio server's process is started: only its configured environment, and it dies
with the daemon.

The SDK's `stdio_client` gives the child the configured variables merged over a few of the
daemon's own (`DEFAULT_INHERITED_ENV_VARS`: HOME, PATH, USER, ...). `env -u NAME` in front of
the command unsets each of those the configuration does not set, so the server sees exactly
what the configuration gives it (README, "MCP tools"). The values themselves travel in the
process environment, never on a command line: any user of the host may read a process's
command line in /proc, not its environment. The executable is looked up on the daemon's PATH
here, because the server may get no PATH at all. Where `setpriv` exists the child also gets
`--pdeathsig KILL`: a daemon killed with SIGKILL leaves no server behind (its own process
group, made by the SDK, would not get the daemon's signal).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence

from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS

from bot.mcp.base import McpUnavailable


def clean_argv(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """`argv` run with exactly `env` (given to the SDK as the process environment), killed
    when the daemon dies. No value of `env` is in the result."""
    program = _which(argv[0], env)
    env_tool = shutil.which("env")
    if env_tool is None:
        raise McpUnavailable("`env` (coreutils) is not installed: cannot clear the environment")
    unset = sorted(set(DEFAULT_INHERITED_ENV_VARS) - set(env))
    out = [env_tool, *(f"--unset={name}" for name in unset), "--", program, *argv[1:]]
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *out] if setpriv else out


def _which(program: str, env: Mapping[str, str]) -> str:
    found = shutil.which(program) or (
        shutil.which(program, path=env["PATH"]) if "PATH" in env else None
    )
    if found is None:
        raise McpUnavailable(f"command not found: {program}")
    if "=" in found:  # `env` would take it for a variable
        raise McpUnavailable(f"a command path with '=' cannot be started: {program}")
    return found
