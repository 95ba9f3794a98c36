"""MCP configuration for the rig and the real-process tests, and a model script."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from bot_sandbox.llm_server import count_tool_results


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


def calls(*steps: tuple[str, dict[str, Any]], summary: str = "Done.") -> Any:
    """One tool call per turn, in order, then `finish`."""

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        done = count_tool_results(request)
        if done < len(steps):
            return {"tool_calls": [steps[done]]}
        return {"tool_calls": [("finish", {"summary": summary})]}

    return policy


def tool_results(entries: list[dict[str, Any]], name: str) -> list[str]:
    return [str(e["content"]) for e in entries if e.get("role") == "tool" and e.get("name") == name]


def offered_tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in request.get("tools") or []}
