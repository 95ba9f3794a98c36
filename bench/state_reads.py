"""State reading per poll: bytes read from the state dir by one poll, 20,000 finished tasks.

Run: .venv/bin/python -m bench.state_reads [--tasks N] [--change-bytes N]
Baseline, measured in the same run: the seed design, where a poll parses every task.json
(`StateStore.all_states()`) and a finished task's task.json keeps its changeset.

A poll's state reading is what `Daemon.poll` does before it submits jobs: the task index (or,
for the baseline, every task file), the running and paused tasks' files, and the task file of
each thread discovery found (`plan_jobs`). Bytes are counted by the kernel (`rchar` in
/proc/self/io: every byte returned by a read system call of this process).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from bot.core.config import LabelSettings
from bot.model.state import PlanItem, Status, TaskState
from bot.model.thread import Platform, TaskKey, TaskSummary
from bot.service.dispatch import plan_jobs
from bot.store.task_files import StateStore
from bot.store.task_index import TaskIndex

RUNNING = 10  # tasks still being worked on, besides the finished ones
DISCOVERED_FINISHED = 40  # finished threads still open with a watched label


def rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise RuntimeError("no rchar in /proc/self/io")


def measured(fn: Callable[[], object]) -> tuple[int, float]:
    before, start = rchar(), time.perf_counter()
    fn()
    return rchar() - before, time.perf_counter() - start


@contextlib.contextmanager
def no_fsync() -> Iterator[None]:
    """Generating 20,000 tasks with an fsync per file takes minutes; durability is not
    what is measured here, so the generator skips it."""
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real


def finished_state(n: int, change_bytes: int) -> TaskState:
    state = TaskState(key=f"github:bench/app#{n}", status=Status.DONE, step=12, initialized=True)
    state.seen = {f"issue:{n * 100 + c}": "2026-11-01T10:00:00Z" for c in range(8)}
    state.base_sha, state.base_branch = "a" * 40, "main"
    state.changes = {"src/app.py": "x = 1\n" * (change_bytes // 6), "README.md": "# app\n"}
    state.plan = [PlanItem(text="read the code", done=True), PlanItem(text="fix it", done=True)]
    state.final_answer = "Fixed the greeting and added a test. " * 4
    state.labels_applied = Status.DONE
    return state


def generate(root: Path, tasks: int, change_bytes: int, seed_format: bool) -> None:
    store = StateStore(root)
    with no_fsync():
        for n in range(1, tasks + 1):
            state = finished_state(n, change_bytes)
            if seed_format:  # what the seed wrote: the whole state, changeset included
                directory = store.task_dir(state.task_key())
                directory.mkdir(parents=True)
                (directory / "task.json").write_text(state.model_dump_json(indent=1))
            else:
                store.save(state)
        old = time.time() - 3600  # finished an hour ago or more
        for path in (root / "tasks").glob("*/*/*/task.json"):
            os.utime(path, (old, old))
        for n in range(tasks + 1, tasks + RUNNING + 1):  # saved just now, as running ones are
            store.save(TaskState(key=f"github:bench/app#{n}", status=Status.RUNNING, step=3))


def discovered(tasks: int) -> list[TaskSummary]:
    numbers = [*range(1, DISCOVERED_FINISHED + 1), *range(tasks + 1, tasks + RUNNING + 1)]
    return [
        TaskSummary(
            TaskKey.parse(f"github:bench/app#{n}"),
            f"task {n}",
            frozenset({"coding agent done"}),
            frozenset(),
            datetime.now(UTC),
        )
        for n in numbers
    ]


def seed_poll(store: StateStore, found: list[TaskSummary]) -> None:
    saved = store.all_states()
    plan_jobs(found, store, saved, LabelSettings(), Platform.GITHUB)


def our_poll(store: StateStore, index: TaskIndex, found: list[TaskSummary]) -> None:
    view = index.refresh()
    plan_jobs(found, store, index.active_states(view), LabelSettings(), Platform.GITHUB)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--change-bytes", type=int, default=4096)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-state-"))
    try:
        start = time.perf_counter()
        generate(tmp / "seed", args.tasks, args.change_bytes, seed_format=True)
        generate(tmp / "ours", args.tasks, args.change_bytes, seed_format=False)
        found = discovered(args.tasks)
        print(
            f"generated: {args.tasks} finished tasks (changeset {args.change_bytes} B each)"
            f" + {RUNNING} running, {len(found)} threads discovered,"
            f" in {time.perf_counter() - start:.0f}s\n"
        )
        seed_store, our_store = StateStore(tmp / "seed"), StateStore(tmp / "ours")
        rows = [("seed: every task.json parsed", *measured(lambda: seed_poll(seed_store, found)))]
        rebuild = TaskIndex(our_store)
        rows.append(("ours: no index yet (rebuilt once)", *measured(lambda: rebuild.refresh())))
        cold = TaskIndex(our_store)  # a daemon just started: the index file from disk
        rows.append(
            ("ours: first poll after a start", *measured(lambda: our_poll(our_store, cold, found)))
        )
        rows.append(("ours: every later poll", *measured(lambda: our_poll(our_store, cold, found))))
        base = rows[0][1]
        print(f"{'one poll':<36} {'MB read':>9} {'vs seed':>8} {'seconds':>8}")
        for name, read, seconds in rows:
            print(f"{name:<36} {read / 1e6:>9.2f} {read / base:>8.3f} {seconds:>8.2f}")
        steady = rows[2][1]
        print(f"\nfirst poll after a start under 5 MB: {steady < 5_000_000}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
