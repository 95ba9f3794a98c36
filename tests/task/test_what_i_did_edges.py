"""The run's account where it could go wrong, end to end with the real clients: a secret in a
command the model ran, a model endpoint that reports no usage, and a run cut short by the
model's endpoint before it ended done, and a control it ignored."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bot.cli import main
from bot.model.state import Status
from bot.task.timeline import build_timeline
from bot_sandbox.llm_server import Scripted, count_tool_results
from tests.conftest import REPO
from tests.rig import Rig
from tests.task.test_what_i_did import JAIL, PRICE, SCHEMA, details
from tests.test_agent_e2e import call, scripted

KEY = "correct-horse-battery-staple"  # a configured secret of no known shape (llm.api_key)
SHAPED = "glpat-" + "Z" * 20  # a token of no configured source, by its shape


@pytest.mark.parametrize("platform", ["github"])
def test_a_secret_in_a_command_is_redacted_in_the_report(rig: Rig) -> None:
    rig.extra_config = JAIL
    rig.llm_options = f", api_key: {KEY}"
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    rig.model.policy = scripted(
        call("run_command", command=f"echo {KEY} {SHAPED} > /dev/null"),
        call("finish", summary="Nothing to change."),
    )
    rig.run_once()
    final = rig.bot_comments(thread)[-1]
    assert "- Commands: `echo [REDACTED] [REDACTED] > /dev/null`: passed" in details(final)
    assert KEY not in final and SHAPED not in final


@pytest.mark.parametrize("platform", ["gitlab"])
def test_a_model_call_without_usage_is_unreported_not_free(
    rig: Rig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.llm_options = PRICE
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    rig.model.policy = scripted(
        {**call("read_file", path="src/app.py"), "usage": False},
        call("finish", summary="Nothing to change."),
    )
    rig.run_once()
    state = rig.state(thread)
    assert state.status is Status.DONE and state.usage.calls == 2
    timeline = build_timeline(rig.store(), rig.key(thread), price=rig.settings.llm.price)
    first, second = [e for e in timeline.entries if e.kind == "reply"]
    assert (first.prompt_tokens, first.cost, first.detail["usage_reported"]) == (None, None, False)
    assert second.prompt_tokens == state.usage.prompt_tokens > 0  # the one that reported
    assert "usage_reported" not in second.detail
    said = details(rig.bot_comments(thread)[-1])
    assert re.search(
        r"- Tokens: .*, cost .* EUR; 1 model call reported no usage \(not counted\)", said
    )

    config = rig.config_file(tmp_path / "show.yaml")
    capsys.readouterr()
    assert main(["show", "-c", str(config), str(rig.key(thread))]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "calls read_file" in line)
    assert re.fullmatch(r"\d\d:\d\d:\d\d  reply       model +unreported +\d+\.\d s +calls .*", row)
    assert "; 1 model call reported no usage" in out.splitlines()[-1]


@pytest.mark.parametrize("platform", ["github"])
def test_a_run_cut_short_by_the_model_shows_the_error_and_ends_done(
    rig: Rig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.llm_options = ", max_retries: 0"
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    rig.model.push(Scripted(status=503))
    rig.model.policy = scripted(call("finish", summary="Nothing to change."))
    rig.run_once()
    assert rig.state(thread).status is Status.RUNNING  # interrupted, to be resumed
    rig.run_once()
    assert rig.state(thread).status is Status.DONE

    config = rig.config_file(tmp_path / "show.yaml")
    capsys.readouterr()
    assert main(["show", "-c", str(config), str(rig.key(thread)), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)
    kinds = [e["kind"] for e in data["entries"]]
    error = next(e for e in data["entries"] if e["kind"] == "error")
    assert error["actor"] == "model" and "503" in error["summary"]
    # The error (the first process), then the answer and the final comment (the next one).
    assert kinds.index("error") < kinds.index("reply") < kinds.index("posted")
    assert [e["detail"]["status"] for e in data["entries"] if e["kind"] == "status"] == [
        "running",
        "done",
    ]
    assert data["totals"]["calls"] == 1  # the refused call is not a model call
    assert "- Steps: 1 model call in " in details(rig.bot_comments(thread)[-1])


@pytest.mark.parametrize("platform", ["gitlab"])
def test_a_control_it_ignored_is_on_the_timeline_once(rig: Rig) -> None:
    rig.forge.world.repo(rig.platform, REPO).roles["tracy"] = "triage"  # GitLab: Reporter
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    paused = "coding agent paused"

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        if count_tool_results(request) == 0:
            labels = [*thread.labels, paused]
            rig.forge.world.set_labels(rig.platform, REPO, thread.number, labels, actor="tracy")
            return call("read_file", path="src/app.py")
        return call("finish", summary="Nothing to change.")

    rig.model.policy = policy
    rig.run_once()
    assert rig.state(thread).status is Status.DONE
    timeline = build_timeline(rig.store(), rig.key(thread))
    ignored = [e for e in timeline.entries if e.kind == "ignored"]
    assert [(e.actor, e.summary) for e in ignored] == [
        ("tracy", f"ignored: added the label {paused} (no write access)")
    ]
    assert ignored[0].detail == {"control": "labeled", "name": paused, "actor": "tracy"}
