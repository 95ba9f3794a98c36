from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.model.state import Status, TaskState
from bot.model.thread import TaskKey
from bot.store.errors import StateError, TaskBusy
from bot.store.task_files import Conversation, StateStore

KEY = TaskKey.parse("github:acme/app#7")


def test_round_trip_and_layout(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    state = TaskState(key=str(KEY), step=3, status=Status.PAUSED)
    state.seen["issue:1"] = "2026-01-01T00:00:00Z"
    store.save(state)
    assert (tmp_path / "tasks/github/acme__app/issue-7/task.json").is_file()
    loaded = store.load(KEY)
    assert loaded is not None and loaded.step == 3 and loaded.status is Status.PAUSED
    assert loaded.seen == {"issue:1": "2026-01-01T00:00:00Z"}
    assert [s.key for s in store.all_states()] == [str(KEY)]
    assert not list(tmp_path.rglob("*.tmp"))


def test_torn_last_line_is_dropped_and_repaired(tmp_path: Path) -> None:
    conversation = Conversation(tmp_path / "c.jsonl")
    conversation.append({"role": "user", "content": "one"})
    with open(tmp_path / "c.jsonl", "ab") as handle:
        handle.write(b'{"role": "assistant", "content": "half')  # crash mid-append
    assert [e["content"] for e in conversation.entries()] == ["one"]
    Conversation(tmp_path / "c.jsonl").append({"role": "user", "content": "two"})
    assert [e["content"] for e in Conversation(tmp_path / "c.jsonl").entries()] == ["one", "two"]


def test_corrupt_state_is_a_clear_error_and_does_not_hide_others(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.save(TaskState(key="github:acme/app#8"))
    bad = store.task_dir(KEY)
    bad.mkdir(parents=True)
    (bad / "task.json").write_text("{not json")
    with pytest.raises(StateError, match="not a valid task state"):
        store.load(KEY)
    assert [s.key for s in store.all_states()] == ["github:acme/app#8"]


def test_one_worker_per_task(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.task_lock(KEY), pytest.raises(TaskBusy), store.task_lock(KEY):
        pass
    with store.task_lock(KEY):  # released
        pass


WRITER = """
import sys
from pathlib import Path
from bot.store.task_files import StateStore
from bot.model.state import TaskState
store = StateStore(Path(sys.argv[1]))
n = 0
print("ready", flush=True)
while True:
    n += 1
    store.save(TaskState(key="github:acme/app#7", step=n, final_answer="x" * (n % 5000)))
"""


def test_state_file_is_never_half_written_under_sigkill(tmp_path: Path) -> None:
    for attempt in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.05 + attempt * 0.03)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        state = StateStore(tmp_path).load(KEY)
        assert state is not None and state.step >= 1
        raw = json.loads((StateStore(tmp_path).task_dir(KEY) / "task.json").read_text())
        assert raw["final_answer"] == "x" * (raw["step"] % 5000)


FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from bot.store.task_files import StateStore
from bot.model.state import TaskState
store = StateStore(Path(sys.argv[1]))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))  # writes past 300 bytes fail: EFBIG
try:
    store.save(TaskState(key="github:acme/app#7", step=2, final_answer="y" * 1000))
except OSError as exc:
    print("failed", exc.errno)
"""


def test_a_full_disk_keeps_the_previous_state(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.save(TaskState(key=str(KEY), step=1))
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path)], capture_output=True, text=True
    )
    assert done.stdout.startswith("failed"), done.stderr
    loaded = store.load(KEY)
    assert loaded is not None and loaded.step == 1
    assert not list(tmp_path.rglob("*.tmp"))
