"""The `mcp:` configuration, and `bot check-config` starting each server once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.core.config import ConfigError, parse_settings, summary
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer
from tests.mcp.conftest import TIME_SERVER, scripted_command
from tests.mcp.rigging import mcp_config
from tests.processes import run_bot, write_config

BASE = "github: {token: t0ken, repositories: [acme/app]}\n"


def settings(mcp: str, extra: str = "", environ: dict[str, str] | None = None, base: Path = Path()):  # type: ignore[no-untyped-def]
    return parse_settings(BASE + extra + mcp, environ or {}, base_dir=base)


def test_servers_repositories_and_the_default_set() -> None:
    got = settings(
        """mcp:
  servers:
    time: {command: [mcp-server-time]}
    docs: {url: "https://docs.internal/mcp"}
  repositories:
    "*": [time]
    acme/app: ["time:get_current_time", docs]
  timeout_seconds: 5
"""
    ).mcp
    assert got.offered("acme/app") == {"time": frozenset({"get_current_time"}), "docs": None}
    assert got.offered("other/repo") == {"time": None}
    assert got.timeout_seconds == 5


def test_trust_defaults_to_the_jail_only() -> None:
    got = settings(
        """mcp:
  servers:
    local: {command: [x]}
    jailed: {command: [x], jail: true}
    web: {url: "https://a.example/mcp"}
    vouched: {command: [x], trusted: true}
""",
        extra="jail: {enabled: true}\n",
    ).mcp.servers
    assert not got["local"].is_trusted and not got["web"].is_trusted
    assert got["jailed"].is_trusted and got["vouched"].is_trusted


@pytest.mark.parametrize(
    ("mcp", "key", "problem"),
    [
        ("mcp: {servers: {a: {}}}", "mcp.servers.a", "either command"),
        ("mcp: {servers: {a: {command: [x], url: 'http://h/'}}}", "mcp.servers.a", "either"),
        ("mcp: {servers: {a: {command: [x], headers: {A: b}}}}", "mcp.servers.a", "headers"),
        ("mcp: {servers: {a: {url: 'http://h/', env: {A: b}}}}", "mcp.servers.a", "env"),
        ("mcp: {servers: {a: {command: [x], working_copy: true}}}", "mcp.servers.a", "jail"),
        ("mcp: {servers: {a: {command: [x], jail: true}}}", "", "jail.enabled"),
        ("mcp: {servers: {a__b: {command: [x]}}}", "mcp.servers", "single '_'"),
        ("mcp: {servers: {a: {command: [x], env: {'A-B': c}}}}", "mcp.servers.a.env", "name"),
        ("mcp: {servers: {a: {command: [x]}}, repositories: {'*': [b]}}", "mcp", "no configured"),
        ("mcp: {servers: {a: {comand: [x]}}}", "mcp.servers.a.comand", "did you mean command"),
        ("mcp: {timeout_seconds: 0}", "mcp.timeout_seconds", "greater than 0"),
    ],
)
def test_bad_mcp_settings_name_the_key(mcp: str, key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings(mcp)
    assert caught.value.path == key
    assert problem in str(caught.value)


def test_secrets_from_env_and_files_are_masked_and_redacted(tmp_path: Path) -> None:
    (tmp_path / "tracker-token").write_text("trk_FILEsecret_0123456789\n")
    got = settings(
        """mcp:
  servers:
    tracker: {command: [x], env: {TZ: UTC, TRACKER_TOKEN_file: tracker-token}}
    docs: {url: "https://d.example/mcp", headers: {Authorization: "Bearer ${DOCS_KEY}"}}
""",
        environ={"DOCS_KEY": "docs_ENVsecret_abcdef"},
        base=tmp_path,
    )
    env = got.mcp.servers["tracker"].env
    assert env["TRACKER_TOKEN"].get_secret_value() == "trk_FILEsecret_0123456789"
    assert "trk_FILEsecret_0123456789" in got.secrets()
    assert "Bearer docs_ENVsecret_abcdef" in got.secrets()
    shown = yaml.safe_dump(summary(got))
    assert "FILEsecret" not in shown and "ENVsecret" not in shown and "UTC" not in shown


def test_check_config_lists_each_servers_tools(
    server: ForgeServer, model: LLMServer, tmp_path: Path
) -> None:
    servers = {"time": [TIME_SERVER], "s": scripted_command(tmp_path / "count")}
    config = write_config(tmp_path, server, model, extra=mcp_config(servers))
    done = run_bot(config, "check-config")
    assert done.returncode == 0, done.stderr
    listed = yaml.safe_load(done.stdout)["mcp_tools"]
    assert set(listed["time"]) == {"get_current_time", "convert_time"}
    assert {"echo", "hang", "crash", "notes", "record"} <= set(listed["s"])
    assert (tmp_path / "count").read_text().splitlines().count("start") == 1  # started once


def test_check_config_exits_2_naming_a_server_that_cannot_start(
    server: ForgeServer, model: LLMServer, tmp_path: Path
) -> None:
    # Every reason a start fails, worded by the adapter: test_client.py.
    command, why = ["/nonexistent/mcp-server"], "command not found"
    servers = {"time": [TIME_SERVER], "broken": command}
    config = write_config(tmp_path, server, model, extra=mcp_config(servers))
    done = run_bot(config, "check-config")
    assert done.returncode == 2
    assert "mcp.servers.broken:" in done.stderr and why in done.stderr
