"""An MCP server with `jail: true`: started inside the jail over the task's working copy
(read-only), with no network and only its configured environment (real jail, real daemon,
emulator and scripted model). The server is a stdlib-only one kept in the repository itself,
since the jail has only the system's Python."""

from __future__ import annotations

import json
import socket

import pytest

from bot.model.state import Status
from bot_sandbox.llm_server import count_tool_results
from tests.conftest import REPO
from tests.mcp.rigging import command_lines, mcp_config, tool_results
from tests.rig import Rig
from tests.test_agent_e2e import call, scripted

SECRET = "jail_ENVsecret_4f2a0123456789"

# The protocol by hand (JSON-RPC lines over stdio): initialize, tools/list, tools/call.
PROBE = r"""
import json, os, socket, sys

def answer(id_, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}) + "\n")
    sys.stdout.flush()

def probe(args):
    report = {"cwd": os.getcwd(), "env": sorted(os.environ)}
    report["state_dir"] = os.path.exists(args["state_dir"])
    notes = "/work/notes.txt"
    report["change"] = open(notes).read() if os.path.exists(notes) else None
    try:
        open("/work/written.txt", "w").close()
        report["work_writable"] = True
    except OSError:
        report["work_writable"] = False
    try:
        socket.create_connection(("127.0.0.1", args["port"]), 2).close()
        report["network"] = True
    except OSError:
        report["network"] = False
    return report

for line in sys.stdin:
    msg = json.loads(line)
    method, id_ = msg.get("method"), msg.get("id")
    if method == "initialize":
        answer(id_, {"protocolVersion": msg["params"]["protocolVersion"],
                     "capabilities": {"tools": {}},
                     "serverInfo": {"name": "probe", "version": "1"}})
    elif method == "tools/list":
        schema = {"type": "object", "properties": {
            "port": {"type": "integer"}, "state_dir": {"type": "string"}}}
        answer(id_, {"tools": [{"name": "probe", "description": "What the server can reach.",
                                "inputSchema": schema}]})
    elif method == "tools/call":
        text = json.dumps(probe(msg["params"]["arguments"]))
        answer(id_, {"content": [{"type": "text", "text": text}], "isError": False})
    elif id_ is not None:
        answer(id_, {})
"""


@pytest.mark.parametrize("platform", ["github"])  # what the jail holds is the same on either
def test_a_jailed_server_sees_the_working_copy_read_only_and_nothing_else(rig: Rig) -> None:
    rig.forge.world.push(rig.platform, REPO, "main", {"tools/probe.py": PROBE}, "probe")
    server = {
        "command": ["python3", "/work/tools/probe.py"],
        "env": {"ONLY": SECRET},
        "jail": True,
        "working_copy": True,
    }
    rig.extra_config = "jail: {enabled: true, timeout_seconds: 60}\n" + mcp_config(
        {"probe": server}
    )
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    thread = rig.issue(title="Probe", body="Probe the server.")
    steps = scripted(
        call("write_file", path="notes.txt", content="the task's change"),
        call("mcp__probe__probe", port=port, state_dir=str(rig.state_dir)),
        call("finish", summary="Probed."),
    )
    running: list[bytes] = []  # every command line on the host while the server runs

    def policy(request: dict[str, object]) -> dict[str, object]:
        if count_tool_results(request) == 2:
            running.extend(command_lines())
        return steps(request)

    rig.model.policy = policy
    try:
        rig.run_once()
    finally:
        listener.close()

    [said] = tool_results(rig.conversation(thread), "mcp__probe__probe")
    report = json.loads(said)  # a jailed server is trusted by default: not quoted
    assert report["cwd"] == "/work"
    assert report["change"] == "the task's change"  # the run's working copy, changes applied
    assert report["work_writable"] is False
    assert report["network"] is False
    assert report["state_dir"] is False
    # Its own variable and the jail's fixed base; PWD from bubblewrap's --chdir, LC_CTYPE from
    # Python's locale coercion: nothing of the daemon's.
    made_inside = {"PWD", "LC_CTYPE"}
    assert set(report["env"]) - made_inside == {"ONLY", "PATH", "HOME", "LANG", "TERM", "CI"}
    assert rig.state(thread).status is Status.DONE
    # Its environment is given to bubblewrap as the process environment, never as options:
    # any user of the host can read a command line.
    assert any(b"/work/tools/probe.py" in line for line in running)
    assert all(SECRET.encode() not in line for line in running)
