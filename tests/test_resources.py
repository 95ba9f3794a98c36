"""Bounded resources (issue 11, hole 5): regex time bound, snapshot cache, task index, prune."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.agent.repo_tools import repo_tools
from bot.agent.tools import Toolbox
from bot.cli import main
from bot.context.tokens import TokenCounter
from bot.core.atomic import atomic_write
from bot.llm.base import ToolCall
from bot.model.state import Status, TaskState
from bot.model.thread import TaskKey
from bot.repo.snapshot import Limits, evict, pin_scope, pinned_snapshot
from bot.repo.workspace import Workspace
from bot.store.task_files import StateStore
from bot.store.task_index import TaskIndex
from bot_sandbox.llm_server import count_tool_results
from tests.rig import Rig
from tests.service.test_daemon_lifecycle import finish

KEY = TaskKey.parse("github:acme/app#7")


def call(toolbox: Toolbox, name: str, **arguments: object) -> str:
    return toolbox.execute(ToolCall("c1", name, json.dumps(arguments))).content


# -- search_code: model-written regexes run with a time bound ---------------------------------


def test_catastrophic_pattern_answers_with_an_error(tmp_path: Path) -> None:
    root = tmp_path / "snap"
    root.mkdir()
    # Stdlib `re` spends seconds on this line and the time grows 1.6 times per extra "a".
    (root / "a.txt").write_text("ok line\n" + "a" * 35 + "!\n")
    toolbox = Toolbox(repo_tools(Workspace(root, {}), TokenCounter(), 2000, trusted=True))
    result = toolbox.execute(ToolCall("c1", "search_code", json.dumps({"pattern": "(a|aa)+$"})))
    assert not result.ok
    assert result.content.startswith("error:") and "took too long" in result.content
    assert "a.txt:2" in result.content  # says where it stopped
    # An ordinary pattern on the same file still works.
    assert call(toolbox, "search_code", pattern=r"ok \w+").startswith("1 matching lines in 1 files")


# -- task state: small finished tasks, an index that is only a cache, prune, status -----------


def cli_config(tmp_path: Path) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\ngithub: {{token: x, repositories: [a/b]}}\n")
    return path


def age(store: StateStore, key: str, days: int, status: Status) -> None:
    """A task saved `days` ago with `status` (save stamps now; the file is then rewritten)."""
    state = TaskState(key=key, status=status)
    store.save(state)
    state.updated_at = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    path = store.task_dir(state.task_key()) / "task.json"
    atomic_write(path, state.model_dump_json().encode())
    then = time.time() - days * 86400
    os.utime(path, (then, then))


def test_finished_task_keeps_a_small_task_json(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    state = TaskState(key=str(KEY), base_sha="abc")
    state.changes = {"big.txt": "x" * 200_000, "gone.py": None}
    store.save(state)
    assert (store.task_dir(KEY) / "task.json").stat().st_size > 200_000  # still working
    state.status = Status.DONE
    store.save(state)
    task_json = store.task_dir(KEY) / "task.json"
    assert task_json.stat().st_size < 4096
    loaded = store.load(KEY)
    assert loaded is not None and loaded.changes == {} and loaded.changes_file
    assert store.archived_changes(loaded) == {"big.txt": "x" * 200_000, "gone.py": None}
    assert state.changes["big.txt"]  # the running process keeps its copy


def test_index_reads_only_changed_task_files(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    for n in range(1, 6):
        age(store, f"github:acme/app#{n}", 30, Status.DONE)
    index = TaskIndex(store)
    first = index.refresh()
    assert first.counts() == {"done": 5} and first.bytes_read > 0
    second = TaskIndex(store).refresh()  # a new process: the index file, no task file
    assert second.counts() == {"done": 5}
    assert second.bytes_read == index.path.stat().st_size
    assert index.refresh().bytes_read == 0  # same process: nothing read at all
    # A file written within the timestamp granularity is not trusted yet: read every time.
    store.save(TaskState(key="github:acme/app#9"))
    size = (store.task_dir(TaskKey.parse("github:acme/app#9")) / "task.json").stat().st_size
    assert index.refresh().bytes_read == size
    assert index.refresh().bytes_read == size


def test_task_json_written_but_index_not_is_still_found(tmp_path: Path) -> None:
    """The crash between writing task.json and the index: the truth is task.json."""
    store = StateStore(tmp_path)
    age(store, "github:acme/app#1", 30, Status.DONE)
    age(store, "github:acme/app#2", 30, Status.DONE)
    assert TaskIndex(store).refresh().active() == []
    indexed = (tmp_path / "cache" / "task-index.jsonl").read_bytes()
    # Task 2 is handed back and running, task 3 is new; the process dies before any index write.
    store.save(TaskState(key="github:acme/app#2", run=2, status=Status.RUNNING))
    store.save(TaskState(key="github:acme/app#3", status=Status.PAUSED))
    assert (tmp_path / "cache" / "task-index.jsonl").read_bytes() == indexed
    index = TaskIndex(store)
    view = index.refresh()
    assert [str(k) for k in view.active()] == ["github:acme/app#2", "github:acme/app#3"]
    assert [s.run for s in index.active_states(view)] == [2, 1]
    # A torn or garbage index is only a cache: rebuilt from the task files.
    (tmp_path / "cache" / "task-index.jsonl").write_bytes(b'["github/acme__app/issue-2","gi\n{]')
    assert len(TaskIndex(store).refresh().active()) == 2


def test_poll_after_crash_resumes_a_running_task_the_index_missed(rig: Rig) -> None:
    done = rig.issue()
    rig.model.policy = lambda req: finish("First one done.")
    rig.run_once()
    assert rig.state(done).status is Status.DONE
    index_file = rig.state_dir / "cache" / "task-index.jsonl"
    assert index_file.exists()
    # A thread without any label: discovery cannot find it, only the state dir knows it.
    lost = rig.issue(labels=[], body="Only the state dir knows this one.")
    StateStore(rig.state_dir).save(TaskState(key=str(rig.key(lost)), status=Status.RUNNING))
    assert b"issue-%d" % lost.number not in index_file.read_bytes()
    rig.model.policy = lambda req: finish("Second one done.")
    rig.run_once()
    assert rig.state(lost).status is Status.DONE
    assert "Only the state dir knows this one." in rig.model.seen_text()


def test_prune_removes_only_old_finished_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = cli_config(tmp_path)
    store = StateStore(tmp_path / "state")
    age(store, "github:a/b#1", 40, Status.DONE)
    age(store, "github:a/b#2", 40, Status.FAILED)
    age(store, "github:a/b#3", 40, Status.RUNNING)  # old but not finished
    age(store, "github:a/b#4", 5, Status.STOPPED)  # finished but recent
    age(store, "github:a/b#5", 40, Status.STOPPED)  # finished and old, but being worked on
    age(store, "github:a/b#6", 1, Status.RUNNING)
    six = store.task_dir(TaskKey.parse("github:a/b#6"))
    for name in ("conversation.run1.jsonl", "changes.run1.json", "conversation.run2.jsonl"):
        (six / name).write_text("{}\n")
    then = time.time() - 40 * 86400
    os.utime(six / "conversation.run1.jsonl", (then, then))
    os.utime(six / "changes.run1.json", (then, then))
    state = store.load(TaskKey.parse("github:a/b#6"))
    assert state is not None
    state.run = 3
    atomic_write(six / "task.json", state.model_dump_json().encode())
    assert main(["prune", "-c", str(config), "--older-than", "30d", "--dry-run"]) == 0
    assert "would remove 3 finished tasks and 2 files of earlier runs" in capsys.readouterr().out
    assert len(store.all_states()) == 6 and (six / "changes.run1.json").exists()  # dry run
    with store.task_lock(TaskKey.parse("github:a/b#5")):
        assert main(["prune", "-c", str(config), "--older-than", "30d"]) == 0
    out = capsys.readouterr().out
    assert "removed github:a/b#1" in out and "removed github:a/b#2" in out
    assert "kept github:a/b#5: being worked on" in out
    assert sorted(s.key for s in store.all_states()) == [
        "github:a/b#3",
        "github:a/b#4",
        "github:a/b#5",
        "github:a/b#6",
    ]
    assert sorted(p.name for p in six.iterdir() if "run" in p.name) == ["conversation.run2.jsonl"]
    assert not store.task_dir(TaskKey.parse("github:a/b#1")).exists()
    assert not [
        p
        for p in store.task_dir(TaskKey.parse("github:a/b#1")).parent.iterdir()
        if p.name.startswith(".")
    ]
    assert main(["prune", "-c", str(config), "--older-than", "30 days"]) == 2
    assert "not a duration" in capsys.readouterr().err


def test_status_names_unreadable_task_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = cli_config(tmp_path)
    store = StateStore(tmp_path / "state")
    bad = store.task_dir(KEY)
    bad.mkdir(parents=True)
    (bad / "task.json").write_text('{"key": "github:acme/app#7", "status": "runn')
    assert main(["status", "-c", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"unreadable: {bad / 'task.json'}: not valid JSON" in out
    assert "no readable tasks" in out
    store.save(TaskState(key="github:acme/app#8", status=Status.DONE))
    (bad / "task.json").write_text('{"key": "github:acme/app#7", "status": "sleeping"}')
    assert main(["status", "-c", str(config)]) == 0
    out = capsys.readouterr().out
    assert "unreadable:" in out and "status: Input should be" in out
    assert "github:acme/app#8" in out


# -- the snapshot cache: least-recently-used to a size, never what is in use, fetched again ----


class Archives:
    """A forge that serves one archive per SHA, `size` bytes of content each."""

    def __init__(self, tmp: Path, size: int = 1000) -> None:
        self.tmp, self.size, self.downloads = tmp, size, 0

    def download_archive(self, repo: str, sha: str, dest: Path) -> None:
        self.downloads += 1
        payload = (sha * self.size)[: self.size].encode()
        with tarfile.open(dest, mode="w:gz") as tar:
            info = tarfile.TarInfo("top/data.txt")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))


def use(forge: Archives, cache: Path, sha: str, limit: int) -> Path:
    """One task run on `sha`: pinned while it lasts, released when it ends."""
    with pin_scope():
        root, _pin = pinned_snapshot(forge, "a/b", sha, cache, Limits(), limit)  # type: ignore[arg-type]
        time.sleep(0.05)  # distinct last-use times (timestamps are coarser than 50 ms nowhere here)
        return root


def cached(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "snapshots").iterdir())


def test_cache_evicts_least_recently_used_down_to_the_limit(tmp_path: Path) -> None:
    forge, cache = Archives(tmp_path), tmp_path / "cache"
    limit = 2500  # room for two 1000-byte snapshots
    for sha in ("a1", "b2", "c3"):
        use(forge, cache, sha, 10_000)
    use(forge, cache, "a1", 10_000)  # a1 is now the most recently used
    assert cached(cache) == ["a1", "b2", "c3"] and forge.downloads == 3
    use(forge, cache, "d4", limit)
    assert cached(cache) == ["a1", "d4"]  # b2 then c3 went, oldest use first
    assert evict(cache, limit) == []  # within the bound: nothing more
    assert evict(cache, 1500) == ["a1"]
    use(forge, cache, "a1", limit)  # evicted: downloaded again
    assert forge.downloads == 5 and (cache / "snapshots" / "a1" / "data.txt").exists()


def test_snapshot_in_use_is_never_evicted(tmp_path: Path) -> None:
    forge, cache = Archives(tmp_path), tmp_path / "cache"
    with pin_scope():
        root, _pin = pinned_snapshot(forge, "a/b", "a1", cache, Limits(), 0)  # type: ignore[arg-type]
        time.sleep(0.05)
        use(forge, cache, "b2", 0)  # a limit of 0: everything not in use goes
        use(forge, cache, "c3", 0)
        assert cached(cache) == ["a1", "c3"]  # a1 is the oldest, but a task reads it
        assert (root / "data.txt").exists()
    assert sorted(evict(cache, 0)) == ["a1", "c3"]  # the run ended: a1 can go now
    assert cached(cache) == []


def test_snapshot_deleted_mid_run_is_fetched_again(rig: Rig) -> None:
    """README says the cache is safe to delete: even while a task reads it."""
    thread = rig.issue()
    cache = rig.state_dir / "cache"

    def policy(req: dict[str, Any]) -> dict[str, Any]:
        results = count_tool_results(req)
        if results == 0:
            shutil.rmtree(cache)  # an operator cleans up while the task works
            return {"tool_calls": [("read_file", {"path": "src/app.py"})]}
        if results == 1:
            shutil.rmtree(cache / "snapshots")
            return {"tool_calls": [("search_code", {"pattern": "print"})]}
        return finish("Read it.")

    rig.model.policy = policy
    rig.run_once()
    results = [str(m["content"]) for m in rig.model.requests[-1]["messages"] if m["role"] == "tool"]
    assert "print('hi')" in results[0] and "error" not in results[0]
    assert results[1].startswith("1 matching lines in 1 files") and "src/app.py" in results[1]
    assert rig.state(thread).status is Status.DONE
    # The run is over: its snapshot is no longer pinned, eviction can take it.
    (sha,) = cached(cache)
    assert evict(cache, 0) == [sha]
