"""`bot show --follow`: what a running task adds, printed once each, with a progress line below
(rewritten in place on a TTY), until the task stops running; and the command's edges: nothing
recorded yet, runs that are not there, `--follow` with `--run`, text that must not reach a
terminal, and colour only on a real terminal (a pseudo-terminal, a real process)."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.cli import main
from bot.core.clock import FakeClock
from bot.model.state import Status, Usage
from bot.service.show import Options, Painter, Screen, command, follow
from bot.store.files import FileStore
from bot.task.record import Events, Stamped
from tests.processes import bot_env
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
    timeline = follow(work.store, KEY, None, Screen(out, tty=False), Painter(False), work.wait)
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
    follow(work.store, KEY, None, Screen(out, tty=True), Painter(True), work.wait)
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


def show(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["show", "-c", config(tmp_path), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_task_with_nothing_recorded_yet_shows_its_header_and_zero_totals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file_store(tmp_path / "state").save(state())  # saved, its conversation not begun
    code, out, _ = show(tmp_path, capsys, str(KEY))
    assert code == 0 and out.startswith(f"{KEY}  run 1 of 1  running\n")
    assert out.splitlines()[-1] == "run 1: 0 model calls, 0 tokens (0 prompt, 0 completion)"
    code, out, _ = show(tmp_path, capsys, str(KEY), "--json")
    assert code == 0 and json.loads(out)["entries"] == []


@pytest.mark.parametrize(
    ("saved", "args", "said"),
    [
        (1, ("--run", "0"), "has runs 1 to 1; there is no run 0"),
        (1, ("--run", "-1"), "there is no run -1"),
        (1, ("--run", "99"), "there is no run 99"),
        (2, ("--run", "1"), "run 1 of task github:acme/app#1 is not kept"),  # pruned
        (0, (), "task github:acme/app#1 has no run on record"),  # a hand-made state
    ],
)
def test_a_run_that_is_not_there_exits_1_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], saved: int, args: tuple[str, ...], said: str
) -> None:
    file_store(tmp_path / "state").save(state(run=saved))
    code, out, err = show(tmp_path, capsys, str(KEY), *args)
    assert (code, out) == (1, "") and said in err and "Traceback" not in err


def test_follow_with_the_current_runs_number_follows_it(tmp_path: Path) -> None:
    work = running(tmp_path)
    out = io.StringIO()
    options = Options(follow=True)
    timeline = command(work.store, KEY, 1, None, out, options, wait=work.wait)
    assert timeline.status == "done" and work.waits == 2
    assert "running: step 2, 320 tokens" in out.getvalue()


def test_follow_with_an_earlier_run_prints_it_once(tmp_path: Path) -> None:
    work = running(tmp_path)
    # Its last status entry says running: its end was lost (a crash between the state saved
    # and the entry appended), yet a run that is archived has ended.
    Events(work.log).status(Status.RUNNING, "resumed")
    work.store.archive_run(KEY, 1)
    work.store.save(state(run=2))
    out = io.StringIO()
    timeline = command(work.store, KEY, 1, None, out, Options(follow=True), wait=work.wait)
    assert (timeline.run, work.waits) == (1, 0)  # it has ended: nothing to wait for
    assert out.getvalue().startswith(f"{KEY}  run 1 of 2  ended")


SHOUT = "\x1b[2J\u202e\u009b31m"  # clear the screen, a bidi override, an 8-bit CSI


def test_nothing_printed_carries_a_control_character_from_outside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = file_store(tmp_path / "state")
    store.save(state(status=Status.FAILED, reason=f"the endpoint said {SHOUT}no"))
    ref = {"id": "9", "updated_at": "2025-01-01T00:00:00Z", "author": f"m{SHOUT}"}
    store.conversation(KEY).append(
        {"role": "user", "content": "hi", "kind": "comments", "comments": [ref]}
    )
    code, text, _ = show(tmp_path, capsys, str(KEY))
    assert code == 0 and "failed (the endpoint said [2J 31mno)" in text.splitlines()[0]
    code, raw, _ = show(tmp_path, capsys, str(KEY), "--json")
    assert code == 0 and raw.isascii()  # escaped: \u001b, \u202e, \u009b
    for printed in (text, raw):
        assert not any(c in printed for c in "\x1b\u202e\u009b")
    data = json.loads(raw)
    assert data["entries"][0]["detail"]["authors"] == [f"m{SHOUT}"]  # the same value, parsed
    assert data["reason"] == f"the endpoint said {SHOUT}no"


def run_in_a_terminal(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> bytes:
    """`bot show` as a real process whose stdout is a pseudo-terminal; what it wrote there."""
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bot", "show", "-c", config(tmp_path), str(KEY), *args],
            stdout=follower,
            stderr=subprocess.PIPE,
            env={**bot_env(), **(env or {})},
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        os.close(follower)
        follower = -1
        written = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            written += chunk
        return written
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)


def test_colour_on_a_terminal_only_and_not_with_no_color(tmp_path: Path) -> None:
    running(tmp_path)
    on_a_tty = run_in_a_terminal(tmp_path)
    assert b"\x1b[36mreply     \x1b[0m" in on_a_tty
    piped = subprocess.run(
        [sys.executable, "-m", "bot", "show", "-c", config(tmp_path), str(KEY)],
        capture_output=True,
        env=bot_env(),
        timeout=60,
        check=True,
    )
    assert b"\x1b" not in piped.stdout and b"answers: first" in piped.stdout
    plain = run_in_a_terminal(tmp_path, env={"NO_COLOR": "1"})
    assert b"\x1b" not in plain and b"answers: first" in plain
