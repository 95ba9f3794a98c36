"""The clock: the fake tests move, and the parts that read the time through the one injected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from bot.agent.repo_tools import SEARCH_SECONDS, SearchCodeArgs, search_code
from bot.app import build_daemon
from bot.core.clock import SYSTEM_CLOCK, FakeClock, format_time
from bot.core.config import LabelSettings
from bot.forge.factory import build_sources
from bot.model.state import Status, TaskState
from bot.model.thread import Platform, TaskKey
from bot.repo.workspace import Workspace, WorkspaceError
from bot.service.dispatch import plan_jobs
from bot.store.files import FileStore
from bot.store.pg_outage import Outage
from tests.rig import Rig

START = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)  # no host's clock is there
KEY = TaskKey.parse("github:acme/app#7")


# -- the fake -----------------------------------------------------------------------------


def test_a_fake_clock_with_no_step_puts_every_event_in_the_same_instant() -> None:
    clock = FakeClock(START)
    assert [clock.now() for _ in range(3)] == [START] * 3
    assert clock.time() == clock.time() == START.timestamp()
    assert clock.monotonic() == clock.monotonic()


def test_a_fake_clock_with_a_step_of_one_puts_each_event_in_its_own_second() -> None:
    clock = FakeClock(START, step=1.0)
    stamps = [format_time(clock.now()) for _ in range(3)]
    assert stamps == ["2031-05-06T07:08:09Z", "2031-05-06T07:08:10Z", "2031-05-06T07:08:11Z"]
    before = clock.monotonic()
    assert clock.monotonic() == before + 1.0


def test_advance_moves_wall_and_monotonic_time_together() -> None:
    clock = FakeClock(START)
    wall, mono = clock.now(), clock.monotonic()
    clock.advance(90.5)
    assert clock.now() - wall == timedelta(seconds=90.5)
    assert clock.monotonic() - mono == 90.5


def test_a_fake_clock_never_goes_back_and_is_always_utc() -> None:
    with pytest.raises(ValueError, match="does not go back"):
        FakeClock(START).advance(-1)
    with pytest.raises(ValueError, match="does not go back"):
        FakeClock(START, step=-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        FakeClock(datetime(2031, 5, 6))  # naive: refused
    assert FakeClock(START).now().tzinfo is UTC
    assert FakeClock().now().microsecond == 0  # the host's time, in whole seconds


def test_the_system_clock_is_aware_utc_and_monotonic() -> None:
    assert SYSTEM_CLOCK.now().utcoffset() == timedelta(0)
    first = SYSTEM_CLOCK.monotonic()
    assert SYSTEM_CLOCK.monotonic() >= first


# -- the parts, on an injected clock --------------------------------------------------------


def test_the_files_store_stamps_updated_at_on_its_clock(tmp_path: Path) -> None:
    store = FileStore(tmp_path, clock=FakeClock(START))
    store.save(TaskState(key=str(KEY)))
    loaded = store.load(KEY)
    assert loaded is not None and loaded.updated_at == "2031-05-06T07:08:09Z"


def test_a_backing_off_task_is_planned_once_the_daemons_clock_passes_retry_at(
    tmp_path: Path,
) -> None:
    clock = FakeClock(START)
    store = FileStore(tmp_path)
    state = TaskState(
        key=str(KEY), status=Status.RUNNING, retry_at=format_time(START + timedelta(seconds=60))
    )

    def plan() -> list[TaskKey]:
        jobs = plan_jobs([], store, [state], LabelSettings(), Platform.GITHUB, now=clock.now())
        return [job.key for job in jobs]

    assert plan() == []
    clock.advance(61)
    assert plan() == [KEY]


def test_an_outage_is_measured_on_the_pools_clock() -> None:
    clock = FakeClock(START)
    outage = Outage("db", str, clock)
    outage.armed = True
    with capture_logs() as logs:
        outage.failed(OSError("away"))
        clock.advance(42.0)
        outage.worked()
    (back,) = [line for line in logs if line["event"] == "database_back"]
    assert back["down_seconds"] == 42.0 and back["failures"] == 1


def test_the_search_deadline_is_on_the_tools_clock(tmp_path: Path) -> None:
    """A clock that moves the whole search budget between two readings: the search is past its
    deadline at the first line, however fast the host is."""
    (tmp_path / "a.txt").write_text("hello\n")
    clock = FakeClock(START, step=SEARCH_SECONDS)
    with pytest.raises(WorkspaceError, match="took too long on the whole search"):
        search_code(Workspace(tmp_path, {}), SearchCodeArgs(pattern="hello"), clock)
    assert search_code(Workspace(tmp_path, {}), SearchCodeArgs(pattern="hello")).startswith(
        "1 matching"
    )


def test_a_daemon_hands_its_clock_to_the_store_and_the_task_run(rig: Rig) -> None:
    """A daemon on a clock of its own: the state its run saves is stamped on that clock, from
    the new task's `created_at` to the last `updated_at`."""
    thread = rig.issue()
    rig.model.policy = lambda _req: {"tool_calls": [("finish", {"summary": "Done."})]}
    settings = rig.settings
    daemon = build_daemon(
        settings, rig.stop, sources=build_sources(settings, rig.stop), clock=FakeClock(START)
    )
    daemon.initialize()
    try:
        daemon.run_once()
        status = daemon._status()
    finally:
        daemon.close()
    state = rig.state(thread)
    assert state.status is Status.DONE
    assert (state.created_at, state.updated_at) == ("2031-05-06T07:08:09Z",) * 2
    assert status.endswith("last poll 07:08:09Z")
