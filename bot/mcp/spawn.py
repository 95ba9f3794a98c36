"""How a stdio server's process is started: only its configured environment, and it dies
with the daemon.

The SDK's `stdio_client` merges a few of the daemon's variables (HOME, PATH, USER, ...) into
the child's environment; `env -i` in front of the command drops them, so the server sees
exactly what the configuration gives it (README, "MCP tools"). The executable is looked up on
the daemon's PATH here, because the server may get no PATH at all. Where `setpriv` exists the
child also gets `--pdeathsig KILL`: a daemon killed with SIGKILL leaves no server behind
(its own process group, made by the SDK, would not get the daemon's signal).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence

from bot.mcp.base import McpUnavailable


def clean_argv(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """`argv` run with exactly `env`, killed when the daemon dies."""
    program = _which(argv[0], env)
    env_tool = shutil.which("env")
    if env_tool is None:
        raise McpUnavailable("`env` (coreutils) is not installed: cannot clear the environment")
    out = [env_tool, "-i", *(f"{key}={value}" for key, value in sorted(env.items()))]
    out += [program, *argv[1:]]
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *out] if setpriv else out


def _which(program: str, env: Mapping[str, str]) -> str:
    found = shutil.which(program) or (
        shutil.which(program, path=env["PATH"]) if "PATH" in env else None
    )
    if found is None:
        raise McpUnavailable(f"command not found: {program}")
    return found
