"""One clock: nothing in `bot/` reads the time but through `bot.core.clock`.

The scan resolves imports (`import time as t`, `from datetime import datetime`, ...) and flags
every use of a time reading outside the clock module, called or not: `clock=time.monotonic`
as a default is a reading too, deferred.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BOT = Path(__file__).resolve().parents[2] / "bot"
CLOCK_MODULE = BOT / "core" / "clock.py"
READINGS = frozenset(
    {
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "time.perf_counter",
        "time.perf_counter_ns",
    }
)


def _imported_names(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it stands for, from every import in the module."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is not None:
                    names[alias.asname] = alias.name
                else:  # `import a.b` binds `a`
                    root = alias.name.split(".")[0]
                    names[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.expr, names: dict[str, str]) -> str | None:
    """`a.b.c` with its root resolved through the imports; None when it is not a name chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in names:
        return None
    return ".".join([names[node.id], *reversed(parts)])


def readings(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, reading) for every use of a time reading in `source`."""
    tree = ast.parse(source, filename)
    names = _imported_names(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name) and isinstance(node.ctx, ast.Load):
            dotted = _dotted(node, names)
            if dotted in READINGS:
                found.append((node.lineno, dotted))
    return sorted(set(found))


def test_nothing_in_bot_reads_the_time_but_the_clock_module() -> None:
    offences = [
        f"{path.relative_to(BOT.parent)}:{line}: {reading}"
        for path in sorted(BOT.rglob("*.py"))
        if path != CLOCK_MODULE
        for line, reading in readings(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not offences, "read the time through a Clock (bot/core/clock.py):\n" + "\n".join(
        offences
    )


def test_the_clock_module_is_where_the_readings_are() -> None:
    """The scan sees the system clock's own readings: it is not blind to the real thing."""
    found = {reading for _line, reading in readings(CLOCK_MODULE.read_text(encoding="utf-8"))}
    assert {"datetime.datetime.now", "time.time", "time.monotonic"} <= found


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import time\ntime.time()", [(2, "time.time")]),
        ("import time as t\nx = t.monotonic() + 1", [(2, "time.monotonic")]),
        ("from time import perf_counter\nperf_counter()", [(2, "time.perf_counter")]),
        ("from time import monotonic as m\ndef f(c=m): ...", [(2, "time.monotonic")]),
        ("import time\ndef f(clock=time.monotonic): ...", [(2, "time.monotonic")]),
        ("from datetime import datetime, UTC\ndatetime.now(UTC)", [(2, "datetime.datetime.now")]),
        ("import datetime\ndatetime.datetime.utcnow()", [(2, "datetime.datetime.utcnow")]),
        ("import datetime as dt\ndt.date.today()", [(2, "datetime.date.today")]),
        ("from datetime import date\ndate.today()", [(2, "datetime.date.today")]),
        ("import time\nx = time.time_ns()", [(2, "time.time_ns")]),
    ],
)
def test_the_scan_finds_each_way_of_reading_the_time(
    source: str, expected: list[tuple[int, str]]
) -> None:
    assert readings(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "import time\ntime.sleep(0.1)",
        "from datetime import datetime, UTC\ndatetime.fromtimestamp(0, UTC)",
        "from datetime import datetime\ndatetime.fromisoformat('2024-01-01T00:00:00+00:00')",
        "def f(clock): return clock.now() + clock.monotonic() + clock.time()",
        "import os\nos.stat('.').st_mtime",
        "class C:\n    def time(self): return 0.0\nC().time()",
    ],
)
def test_what_does_not_read_the_time_passes(source: str) -> None:
    assert readings(source) == []
