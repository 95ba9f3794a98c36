"""Jail start-up cost: one command in bubblewrap against a bare subprocess, same run.

Run: .venv/bin/python -m bench.jail_bench [--runs 50]

Both run `/bin/sh -c true`; the jail adds prlimit, bubblewrap's namespaces and mounts, and (as
root) the switch to the task's uid. Also measured: making a working copy of a repository of
`--files` small files, which happens once per task run, not per command.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bot.jail import Jail


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    snapshot = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    for n in range(args.files):
        path = snapshot / f"pkg{n % 50}" / f"mod{n}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"VALUE = {n}\n")
    jail = Jail()
    try:
        copy_times = timed(lambda: jail.work_copy(snapshot, {}).remove(), 5)
        work = jail.work_copy(snapshot, {})
        bare = timed(lambda: subprocess.run(["/bin/sh", "-c", "true"], check=True), args.runs)
        jailed = timed(lambda: jail.run("true", work), args.runs)
        work.remove()
    finally:
        shutil.rmtree(snapshot)
    b, j = statistics.median(bare), statistics.median(jailed)
    print(f"{'':24} {'median ms':>10} {'p90 ms':>8}")
    for name, samples in (("bare subprocess", bare), ("jail (bwrap)", jailed)):
        p90 = sorted(samples)[int(len(samples) * 0.9)]
        print(f"{name:24} {statistics.median(samples) * 1000:10.2f} {p90 * 1000:8.2f}")
    print(f"jail / bare: {j / b:.1f}x; extra per command: {(j - b) * 1000:.1f} ms")
    print(f"working copy of {args.files} files: {statistics.median(copy_times) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
