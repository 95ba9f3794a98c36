"""MCP configuration for the rig and the real-process tests, and what to read back."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def mcp_config(
    servers: Mapping[str, Sequence[str] | Mapping[str, Any]],
    offered: Sequence[str] | None = None,
    timeout: float = 600,
) -> str:
    """`mcp:` YAML: each server a command (a list) or its whole settings; every repository
    is offered `offered` (default: every server)."""
    body: dict[str, Any] = {
        name: {"command": list(spec)} if isinstance(spec, (list, tuple)) else dict(spec)
        for name, spec in servers.items()
    }
    return "mcp: " + json.dumps(
        {
            "servers": body,
            "repositories": {"*": list(offered if offered is not None else servers)},
            "timeout_seconds": timeout,
        }
    )


def tool_results(entries: list[dict[str, Any]], name: str) -> list[str]:
    return [str(e["content"]) for e in entries if e.get("role") == "tool" and e.get("name") == name]


def offered_tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in request.get("tools") or []}


def server_processes(marker: Path) -> list[str]:
    """The pids of processes whose command line names `marker` (a server's count file)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if str(marker).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def command_lines() -> list[bytes]:
    """Every process's command line on this machine (what any local user can read)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes())
        except OSError:
            continue
    return out
