"""The "What I did" section is public-safe as Markdown: names that came from a fork's code, the
model or a login (file paths, commands, tool names, authors) stay inside code spans, on their
own line, whatever they hold; they pass the caller's filter (internal notes, secrets) whole,
before they are cut; an internal note spread over two names leaves every name out. Rendered by
a real CommonMark renderer with HTML passed through, as the forges render comments before they
sanitize them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from markdown_it import MarkdownIt

from bot.core.log import Redactor
from bot.model.state import Usage
from bot.task.confidential import withhold
from bot.task.report import code, duration, what_i_did
from bot.task.timeline import Entry, Timeline, Totals, build_timeline
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


NOTE = "Customer ACME pays 40k a year and says they will leave in March"


def bare(*entries: Entry, step: int = 1) -> Timeline:
    none = Totals(calls=step, prompt_tokens=10, completion_tokens=2)
    return Timeline(
        key=str(KEY), run=1, runs=1, status="running", reason=None, step=step,
        entries=entries, totals=none, task_totals=none, busy_seconds=0.0,
        started=START, last_activity=START,
    )  # fmt: skip


def command(text: str, outcome: str | None) -> Entry:
    detail = {"name": "run_command", "target": text, "ok": True, "outcome": outcome}
    return Entry(at=START, kind="tool", actor="tool", summary="", detail=detail)


def test_a_note_split_over_two_names_leaves_every_name_out() -> None:
    # Each name alone holds too little of the note to be withheld; together they hold a run.
    # Withheld as every post is, the run would take the first span's closing backticks with
    # it and the second name's HTML would render.
    changes = {"docs/a``b Customer ACME pays 40k a": "x", "year and says <b>bold</b> x": "y"}
    section = what_i_did(bare(), changes, START, public=lambda t: withhold(t, [NOTE]))
    posted = withhold(section, [NOTE])  # Poster.deliver, on the whole comment
    html = MarkdownIt("commonmark").render(posted)
    assert posted == section and "<b>" not in html
    assert "<li>Files changed: 2 names withheld</li>" in html


def test_a_secret_is_redacted_before_a_long_name_is_cut() -> None:
    secret = "s3cr3t-" + "k" * 40
    long = "curl " + "x" * 85 + f" -H 'Authorization: {secret}'"  # across the cut at 120
    section = what_i_did(bare(command(long, "passed")), {}, START, Redactor([secret]).scrub)
    assert secret[:8] not in section and "s3cr3t" not in section


def test_an_outcome_is_plain_only_when_it_is_in_our_words() -> None:
    section = what_i_did(
        bare(command("make", "failed (exit status 2)"), command("ls", "not run: *x* <i>y</i>")),
        {},
        START,
    )
    assert "`make`: failed (exit status 2), `ls`: `not run: *x* <i>y</i>`" in section


def test_long_lists_are_cut_and_counted() -> None:
    tools = [  # a model that calls tools that do not exist, each once
        Entry(at=START, kind="tool", actor="tool", summary="", detail={"name": f"t{n:02}"})
        for n in range(25)
    ]
    section = what_i_did(bare(*tools, *(command(f"c{n}", "passed") for n in range(22))), {}, START)
    lines = section.splitlines()
    tools_line = next(line for line in lines if line.startswith("- Tools called: "))
    assert tools_line.startswith("- Tools called: `run_command` (22), `t00` (1), `t01` (1)")
    assert tools_line.endswith(", `t18` (1) and 6 more")  # 26 names: 20 shown
    assert next(line for line in lines if line.startswith("- Commands: ")).endswith(" and 2 more")
