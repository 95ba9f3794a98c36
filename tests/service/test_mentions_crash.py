"""A real `bot` process killed (SIGKILL) with a backlog of mentions: the next one handles all.

The killed daemon had read the inbox and handed the jobs to its workers; most had not started.
An inbox item is settled (marked read/done) only once its task's state is saved, so what the
dead process had not recorded is still unread/pending and the next process starts it.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

from bot.model.state import Status
from bot_sandbox.forge_server import ForgeServer, RecordedRequest
from bot_sandbox.llm_server import LLMServer
from tests.processes import run_bot, start_bot, write_config
from tests.rig import Rig
from tests.service.test_mentions_inbox import SettleWatch, mentioned, pending, unread

ANSWER = {"github": r"^/repos/[^/]+/[^/]+/issues/\d+/comments$", "gitlab": r"/notes$"}


def test_a_daemon_killed_with_a_backlog_of_mentions_loses_none(
    server: ForgeServer, model: LLMServer, platform: str, tmp_path: Path
) -> None:
    rig = Rig(server, model, platform, tmp_path / "state")  # its store and keys, to look
    server.notifications_poll_interval = 1  # the restarted process may read again soon
    threads = mentioned(rig, 8)
    model.policy = lambda _request: {
        "delay": 0.2,
        "tool_calls": [("finish", {"summary": "Done."})],
    }
    config = write_config(tmp_path, server, model)
    watch = SettleWatch(rig)
    killed: list[str] = []

    def kill_at_the_first_answer(record: RecordedRequest) -> None:
        watch.on_request(record)
        if record.method == "POST" and re.search(ANSWER[platform], record.path) and not killed:
            killed.append(record.path)
            os.kill(proc.pid, signal.SIGKILL)  # one task answered; the others not yet

    server.before_response = kill_at_the_first_answer
    proc = start_bot(config, "run", "--once", quiet=True)
    proc.wait(timeout=120)
    assert killed and proc.returncode == -signal.SIGKILL
    unfinished = [t for t in threads if rig.store().load(rig.key(t)) is None]
    assert unfinished  # the kill left tasks not even started
    for _ in range(2):  # the next daemon works them; the one after settles the last items
        time.sleep(1.1)  # past the X-Poll-Interval the dead one was told
        done = run_bot(config, "run", "--once")
        assert done.returncode == 0, done.stderr[-2000:]
    assert all(rig.state(t).status is Status.DONE for t in threads)
    assert (unread(server) if platform == "github" else pending(server)) == set()
    assert watch.early == []
    rig.close()
