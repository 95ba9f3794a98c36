from __future__ import annotations

import sys
from pathlib import Path

SCRIPTED = Path(__file__).with_name("scripted_server.py")


def scripted_command(count: Path, big_fields: int = 0) -> tuple[str, ...]:
    """The scripted server's command line (this interpreter, so the SDK is importable)."""
    return (sys.executable, str(SCRIPTED), str(count), str(big_fields))


def count_lines(count: Path, what: str) -> int:
    return count.read_text().splitlines().count(what) if count.exists() else 0


# `mcp-server-time` from the package index (the dev extras), beside this interpreter.
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))
