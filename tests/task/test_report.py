"""The "What I did" section is public-safe as Markdown: names that came from a fork's code, the
model or a login (file paths, commands, tool names, authors) stay inside code spans, on their
own line, whatever they hold. Rendered by a real CommonMark renderer with HTML passed through,
as the forges render comments before they sanitize them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from markdown_it import MarkdownIt

from bot.model.state import Usage
from bot.task.report import code, duration, what_i_did
from bot.task.timeline import build_timeline
from tests.store.helpers import KEY, file_store, state

EVIL = "x` y`` <img src=x onerror=alert(1)> </details> @alice #1 **bold**\n- [ ] injected"
START = datetime(2025, 5, 6, 7, 0, 0, tzinfo=UTC)


def hostile_run(tmp_path: Path) -> str:
    store = file_store(tmp_path / "state")
    store.save(state(step=1, usage=Usage(calls=1, prompt_tokens=10, completion_tokens=2)))
    log = store.conversation(KEY)
    calls = [
        ("c1", "read_file", json.dumps({"path": f"docs/{EVIL}.md"})),
        ("c2", "run_command", json.dumps({"command": f"cat {EVIL}"})),
        ("c3", f"tool{EVIL}", "{}"),
    ]
    log.append(
        {
            "role": "user",
            "kind": "initial",
            "at": START.isoformat().replace("+00:00", "Z"),
            "comments": [{"id": "5", "updated_at": "2025-01-01T00:00:00Z", "author": EVIL}],
        }
    )
    log.append(
        {
            "role": "assistant",
            "kind": "reply",
            "step": 1,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in calls
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2},
        }
    )
    for call_id, name, _ in calls:
        log.append(
            {"role": "tool", "kind": "tool", "tool_call_id": call_id, "name": name, "ok": True,
             "outcome": "passed" if name == "run_command" else None}
        )  # fmt: skip
    changes = {f"src/{EVIL}.py": "print(1)\n", f"old/{EVIL}": None}
    timeline = build_timeline(store, KEY)
    store.close()
    return what_i_did(timeline, changes, now=START + timedelta(seconds=75))


def test_names_from_outside_stay_inside_code_spans(tmp_path: Path) -> None:
    section = hostile_run(tmp_path)
    html = MarkdownIt("commonmark").render(section)
    outside = re.sub(r"<code>.*?</code>", "", html, flags=re.S)
    assert "<img" not in html and "onerror" not in outside and "@" not in outside
    assert "<strong>" not in html and "#1" not in outside and "injected" not in outside
    assert html.count("</details>") == 1 and html.rstrip().endswith("</details>")
    items = re.findall(r"<li>(.*?)</li>", html, flags=re.S)
    labels = [item.split(":")[0] for item in items]
    assert labels == [
        "Steps",
        "Tokens",
        "Tools called",
        "Files read",
        "Files changed",
        "Commands",
        "Comments heard",
    ]
    assert (
        items[0] == "Steps: 1 model call in 1 min 15 s"
        and "12 (10 prompt, 2 completion)" in items[1]
    )
    assert "&lt;img src=x onerror=alert(1)&gt;" in items[3]  # shown, as text
    assert items[4].count("<code>") == 2 and "deleted <code>" in items[4]


def test_a_code_span_is_longer_than_any_backtick_run_inside() -> None:
    assert code("plain") == "`plain`"
    assert code("a`b") == "``a`b``"
    assert code("``x``") == "``` ``x`` ```"
    assert code("two\nlines\x1b[31m") == "`two lines [31m`"
    assert code("") == "`(empty)`"
    assert code("x" * 500).endswith("…`") and len(code("x" * 500)) == 122


def test_durations_read_as_people_say_them() -> None:
    assert [duration(s) for s in (0.04, 9.96, 45, 185, 7500)] == [
        "0.0 s",
        "10.0 s",
        "45 s",
        "3 min 5 s",
        "2 h 5 min",
    ]
