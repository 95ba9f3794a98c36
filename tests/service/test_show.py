"""`bot show --follow`: what a running task adds, printed once each, with a progress line below
(rewritten in place on a TTY), until the task stops running; and the command's edges."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.cli import main
from bot.core.clock import FakeClock
from bot.model.state import Status, Usage
from bot.service.show import follow
from bot.store.files import FileStore
from bot.task.record import Events, Stamped
from tests.store.helpers import KEY, file_store, state

CLOCK = FakeClock(datetime(2025, 7, 1, 12, 0, 0, tzinfo=UTC), step=1)


def reply(step: int, text: str) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": text,
        "kind": "reply",
        "step": step,
        "usage": {"prompt_tokens": 100 * step, "completion_tokens": 10},
        "duration": 0.5,
    }


class Work:
    """The daemon's side, one step per wait: a reply, then the end."""

    def __init__(self, store: FileStore) -> None:
        self.store = store
        self.log = Stamped(store.conversation(KEY), CLOCK)
        self.waits = 0

    def wait(self, seconds: float) -> bool:
        self.waits += 1
        if self.waits == 1:
            self.log.append(reply(2, "second"))
            self.store.save(
                state(step=2, usage=Usage(calls=2, prompt_tokens=300, completion_tokens=20))
            )
        else:
            self.store.save(
                state(
                    status=Status.DONE,
                    step=2,
                    usage=Usage(calls=2, prompt_tokens=300, completion_tokens=20),
                )
            )
            Events(self.log).status(Status.DONE)
        return False


def running(tmp_path: Path) -> Work:
    store = file_store(tmp_path / "state")
    store.save(state(step=1, usage=Usage(calls=1, prompt_tokens=100, completion_tokens=10)))
    work = Work(store)
    work.log.append(reply(1, "first"))
    return work


def test_follow_prints_each_new_entry_once_and_a_progress_line_until_the_end(
    tmp_path: Path,
) -> None:
    work = running(tmp_path)
    out = io.StringIO()
    timeline = follow(work.store, KEY, None, out, tty=False, wait=work.wait)
    lines = out.getvalue().splitlines()
    assert timeline.status == "done" and work.waits == 2
    assert [line.split("  ")[-1] for line in lines if "  reply " in line] == [
        "answers: first",
        "answers: second",
    ]
    progress = [line for line in lines if line.startswith("running: step")]
    assert [p.split(", last activity")[0] for p in progress] == [
        "running: step 1, 110 tokens",
        "running: step 2, 320 tokens",
    ]
    assert sum(1 for line in lines if "  status " in line) == 1
    assert lines[-1] == "run 1: 2 model calls, 320 tokens (300 prompt, 20 completion)"
    assert "\x1b" not in out.getvalue()


def test_on_a_tty_the_progress_line_is_rewritten_in_place(tmp_path: Path) -> None:
    work = running(tmp_path)
    out = io.StringIO()
    follow(work.store, KEY, None, out, tty=True, wait=work.wait)
    text = out.getvalue()
    # The progress line has no newline of its own; the next entry clears it first.
    assert re.search(
        r"\r\x1b\[Krunning: step 1, 110 tokens, last activity \d\d:\d\d:\d\d"
        r"\r\x1b\[K\x1b\[2m\d\d:\d\d:\d\d\x1b\[0m  \x1b\[36mreply     \x1b\[0m",
        text,
    )
    assert "running: step 1, 110 tokens, last activity" not in text.replace("\r\x1b[Krunning", "")


def config(tmp_path: Path) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(
        f"state_dir: {tmp_path / 'state'}\ngithub: {{token: x, repositories: [acme/app]}}\n"
    )
    return str(path)


def test_follow_with_json_waits_and_prints_only_the_final_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = running(tmp_path)
    work.wait(0)
    work.wait(0)  # done before the command starts: nothing to wait for
    assert main(["show", "-c", config(tmp_path), str(KEY), "--follow", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "done" and [e["kind"] for e in data["entries"]] == [
        "reply",
        "reply",
        "status",
    ]


def test_a_reference_that_does_not_parse_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "-c", config(tmp_path), "acme/app#1"]) == 2
    assert "bot:" in capsys.readouterr().err
