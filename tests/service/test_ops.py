"""Running it for real: sd_notify over a real socket, healthcheck, metrics, sandbox, packaging."""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from bot.app import build_daemon
from bot.cli import main
from bot.service.health import HeartbeatWriter
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer
from tests.processes import bot_env, write_config
from tests.rig import Rig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    yield sock, path
    sock.close()


def receive(sock: socket.socket, until: str, timeout: float, times: int = 1) -> list[str]:
    """Datagrams until `until` was seen `times` times, or `timeout` seconds passed."""
    messages: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            messages.append(sock.recv(4096).decode())
        except TimeoutError:
            continue
        if sum(until in m for m in messages) >= times:
            break
    return messages


def test_sd_notify_ready_watchdog_stopping(
    server: ForgeServer, model: LLMServer, tmp_path: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, path = notify_socket
    config = write_config(tmp_path, server, model)
    env = {**bot_env(), "NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "run", "-c", str(config)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = receive(sock, "READY=1", 30)
        assert any("READY=1" in m for m in ready), ready
        assert any(m.startswith("READY=1\nSTATUS=") for m in ready)
        pings = receive(sock, "WATCHDOG=1", 10, times=3)
        assert sum("WATCHDOG=1" in m for m in pings) >= 3
        assert any("STATUS=0 tasks running; last poll" in m for m in pings)
        proc.send_signal(signal.SIGTERM)
        stopping = receive(sock, "STOPPING=1", 10)
        assert any("STOPPING=1" in m for m in stopping)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def health_config(tmp_path: Path) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(
        f"state_dir: {tmp_path}\npoll_interval_seconds: 10\n"
        "github: {token: x, repositories: [a/b]}\nhealth: {max_missed_polls: 3}\n"
    )
    return path


def test_healthcheck_fresh_stale_failing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = health_config(tmp_path)
    assert main(["healthcheck", "-c", str(config)]) == 1
    assert "no heartbeat" in capsys.readouterr().out

    now = [1000.0]
    writer = HeartbeatWriter(tmp_path, clock=lambda: now[0])
    writer.poll(ok=True, running=2)
    os.utime(tmp_path / "heartbeat")
    real = time.time()
    writer.clock = lambda: real  # fresh, successful
    writer.poll(ok=True, running=2)
    assert main(["healthcheck", "-c", str(config)]) == 0
    assert capsys.readouterr().out.startswith("ok: heartbeat")

    writer.clock = lambda: real - 100  # stale: 100 s > 3 x 10 s
    writer.write()
    assert main(["healthcheck", "-c", str(config)]) == 1
    assert "old (limit 30s)" in capsys.readouterr().out

    writer.clock = lambda: real - 40  # failing for 40 s, heartbeat itself fresh
    writer.poll(ok=False, error="AuthError: GitHub rejected the token (401)")
    writer.clock = lambda: real
    writer.poll(ok=False, error="AuthError: GitHub rejected the token (401)")
    assert main(["healthcheck", "-c", str(config)]) == 1
    assert "polls have failed for 40s: AuthError" in capsys.readouterr().out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_metrics_endpoint_is_scraped(rig: Rig) -> None:
    from bot.core.metrics import Metrics

    rig.issue(title="Say hi", body="nothing to change")
    rig.comment(rig.forge.world.all_threads()[0], "hello")
    rig.model.policy = lambda req: {"tool_calls": [("finish", {"summary": "done"})]}
    metrics = Metrics()
    port = free_port()
    metrics.serve(f"127.0.0.1:{port}")
    settings = rig.settings
    daemon = build_daemon(settings, rig.stop, metrics=metrics)
    daemon.initialize()
    try:
        daemon.run_once()
    finally:
        daemon.close()
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    platform = rig.platform
    assert re.search(rf'bot_polls_total{{platform="{platform}",result="ok"}} 1\.0', text)
    assert re.search(rf'bot_api_requests_total{{outcome="ok",platform="{platform}"}} \d+', text)
    # One series per rate-limit bucket (issue 19): GitHub's core, GitLab's API throttle.
    bucket = "core" if platform == "github" else "throttle_authenticated_api"
    assert re.search(
        rf'bot_rate_limit_remaining{{bucket="{bucket}",platform="{platform}"}} \d+', text
    )
    assert 'bot_tasks{status="done"} 1.0' in text and 'bot_tasks{status="running"} 0.0' in text
    assert re.search(r'bot_llm_tokens_total{kind="prompt"} [1-9]', text)
    assert "bot_comment_delivery_seconds_bucket" in text
    documented = (ROOT / "docs" / "log-events.md").read_text()
    for name in set(
        re.findall(
            r"^(bot_[a-z_]+?)(?:_total|_bucket|_count|_sum|_created)?[{ ]", text, re.MULTILINE
        )
    ):
        assert f"`{name}`" in documented, name


def test_sandbox_until_done_exits_0() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot", "sandbox", "--until-done"],
        capture_output=True,
        text=True,
        env=bot_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sandbox: all demo tasks done" in done.stdout
    assert "Draft change request" in done.stdout
    # The demo repository's checks ran in the jail (bubblewrap is installed by system-deps).
    assert "`python3 -m unittest -v demo.test_greet`: passed" in done.stdout


def test_the_demo_says_what_it_did_on_both_forges_and_bot_show_prints_that_run(
    tmp_path: Path,
) -> None:
    state = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "bot", "sandbox", "--until-done", "--state-dir", str(state)],
        capture_output=True,
        text=True,
        env=bot_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # The thread printer indents each comment's lines; one final comment per forge.
    said = re.findall(
        r"^    <details><summary>What I did</summary>\n    \n(.*?)\n    \n    </details>$",
        done.stdout,
        re.S | re.M,
    )
    assert len(said) == 2, done.stdout[-3000:]
    for platform, section in zip(("github", "gitlab"), said, strict=True):
        tokens = re.search(r"- Tokens: ([\d,]+) \(([\d,]+) prompt, ([\d,]+) completion\)", section)
        assert tokens is not None and re.search(r"cost \d+\.\d+ USD", section), section
        assert "- Tools called: `update_plan` (2)" in section
        config = str(state / "sandbox.yaml")
        shown = subprocess.run(
            [sys.executable, "-m", "bot", "show", "-c", config, f"{platform}:demo/app#1"],
            capture_output=True,
            text=True,
            env=bot_env(),
            timeout=60,
            check=False,
        )
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0] == f"{platform}:demo/app#1  run 1 of 1  done"
        replies = [line for line in lines if re.match(r"\d\d:\d\d:\d\d  reply ", line)]
        assert len(replies) == 6
        assert all(re.search(r" \d[\d,]*\+\d+ .* \d+\.\d{4,6}  calls ", r) for r in replies)
        total, prompt, completion = tokens.groups()  # the same run as the report's
        assert lines[-1].startswith(
            f"run 1: 6 model calls, {total} tokens ({prompt} prompt, {completion} completion), "
        ) and lines[-1].endswith(" USD")


def dockerfile_stages(text: str) -> list[list[tuple[str, str]]]:
    """(INSTRUCTION, arguments) per build stage, comments dropped and continuations joined,
    so that a property is read from the instruction itself and never from a comment."""
    kept = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    stages: list[list[tuple[str, str]]] = []
    for line in "\n".join(kept).replace("\\\n", " ").splitlines():
        if not line.strip():
            continue
        instruction, _, arguments = line.strip().partition(" ")
        if instruction.upper() == "FROM":
            stages.append([])
        stages[-1].append((instruction.upper(), " ".join(arguments.split())))
    return stages


def instructions(stage: list[tuple[str, str]], name: str) -> list[str]:
    return [arguments for instruction, arguments in stage if instruction == name]


def accepted_by_the_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> bool:
    """The command line parses (argparse would exit 2 with usage) and reaches the config."""
    assert argv[-2] == "-c"  # pointed at a missing file, so nothing ever starts for real
    assert main([*argv[:-1], "/nonexistent/config.yaml"]) == 2
    return "cannot read config file" in capsys.readouterr().err


def test_dockerfile_properties(capsys: pytest.CaptureFixture[str]) -> None:
    build, final = dockerfile_stages((ROOT / "Dockerfile").read_text())
    for stage in (build, final):
        assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+( AS \w+)?", stage[0][1])
    # The same install script `make` (and so CI) runs.
    assert instructions(build, "RUN") == ["sh scripts/install-venv /opt/venv ."]
    makefile = (ROOT / "Makefile").read_text()
    assert "\tsh scripts/install-venv $(VENV)" in makefile
    setup = " && ".join(instructions(final, "RUN"))
    assert "apt-get install -y --no-install-recommends tini" in setup
    assert "--uid 10001" in setup and "chown bot:bot /data" in setup
    assert instructions(final, "USER")[-1] == "10001:10001"
    assert "PYTHONUNBUFFERED=1" in " ".join(instructions(final, "ENV"))
    assert [json.loads(v) for v in instructions(final, "VOLUME")] == [["/data"]]
    entrypoint = json.loads(instructions(final, "ENTRYPOINT")[-1])
    command = json.loads(instructions(final, "CMD")[-1])
    assert entrypoint == ["/usr/bin/tini", "--", "bot"]
    (healthcheck,) = instructions(final, "HEALTHCHECK")
    probe = json.loads(healthcheck.split(" CMD ", 1)[1])
    assert probe[0] == "bot"
    # What the container runs is a command line the CLI accepts.
    assert accepted_by_the_cli(command, capsys)
    assert accepted_by_the_cli(probe[1:], capsys)


def test_systemd_unit_properties(capsys: pytest.CaptureFixture[str]) -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(ROOT / "systemd" / "coding-agent-bot.service")
    service = unit["Service"]
    assert service["Type"] == "notify" and "WatchdogSec" in service
    assert int(service["TimeoutStopSec"]) >= 30 and service["Restart"] == "on-failure"
    for key in ("DynamicUser", "ProtectHome", "PrivateTmp", "NoNewPrivileges"):
        assert service[key] == "yes"
    assert service["ProtectSystem"] == "strict" and service["StateDirectory"] == "coding-agent-bot"
    assert (
        service["SystemCallFilter"] == "@system-service" and service["CapabilityBoundingSet"] == ""
    )
    assert "LoadCredential" in service and "RestrictAddressFamilies" in service
    assert "StartLimitBurst" in unit["Unit"]
    program, *argv = service["ExecStart"].split()
    assert program.endswith("/.venv/bin/bot") and accepted_by_the_cli(argv, capsys)


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed"
)
def test_systemd_unit_verifies(tmp_path: Path) -> None:
    unit = (ROOT / "systemd" / "coding-agent-bot.service").read_text()
    fake_bot = tmp_path / "bot"
    fake_bot.write_text("#!/bin/sh\n")
    fake_bot.chmod(0o755)
    target = tmp_path / "coding-agent-bot.service"
    target.write_text(unit.replace("/opt/coding-agent-bot/.venv/bin/bot", str(fake_bot)))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(target)], capture_output=True, text=True, check=False
    )
    # systemd-analyze exits 0 on ignored settings ("Unknown key", "Failed to parse"), so any
    # line it prints is a problem, whether or not it names the file.
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    # The verifier does report a broken unit here (it is not silently doing nothing).
    target.write_text(target.read_text().replace("Type=notify", "Tpye=notify"))
    broken = subprocess.run(
        ["systemd-analyze", "verify", str(target)], capture_output=True, text=True, check=False
    )
    assert "Unknown key 'Tpye'" in broken.stderr


def test_every_log_event_is_documented() -> None:
    """Operators look events up in docs/log-events.md: a new event without a line fails here."""
    documented = (ROOT / "docs" / "log-events.md").read_text()
    call = re.compile(r"\blog\.(?:debug|info|warning|error|exception)\(\s*\"([a-z_]+)\"")
    events = {
        name for path in (ROOT / "bot").rglob("*.py") for name in call.findall(path.read_text())
    }
    assert len(events) > 50  # the pattern still finds the calls
    assert sorted(e for e in events if f"`{e}`" not in documented) == []
