"""A run's account, end to end with the real clients against the emulator: the final comment's
"What I did" section on both forges and both store backends, `bot show` over the same run
(tokens and cost at `llm.price`), `--json`, `--run 1` after a second run, a restart in the
middle, internal notes, `agent.report: false`, and the token and cost metrics."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bot.app import build_daemon
from bot.cli import main
from bot.core.metrics import Metrics
from bot.core.pricing import shown
from bot.forge.factory import build_sources
from bot.model.state import Status
from bot.task.confidential import WITHHELD
from bot.task.timeline import build_timeline
from tests.rig import Rig
from tests.store.helpers import migrated
from tests.task.test_internal_notes import PIECES, SECRET, leaks
from tests.test_agent_e2e import call, scripted

PRICE = ", price: {input_per_million: 2.5, output_per_million: 10, currency: EUR}"
JAIL = """
jail:
  enabled: true
  timeout_seconds: 60
  repositories:
    acme/app: {checks: ["python3 src/app.py"]}
"""
# The command prints this; its text does not hold it (the report never shows output).
COMMAND = "python3 -c \"print('x' * 3 + 'yz-marker')\""
PRINTED = "xxxyz-marker"
DEMO = (
    call("update_plan", items=[{"text": "Read src/app.py"}, {"text": "Print hello"}]),
    call("read_file", path="src/app.py"),
    call("edit_file", path="src/app.py", old="print('hi')", new="print('hello')"),
    call("run_command", command=COMMAND),
    call("read_file", path="src/app.py"),
    call("finish", summary="src/app.py now prints hello."),
)


def cost(prompt: int, completion: int) -> Decimal:
    """The price of PRICE, worked out here independently of bot/core/pricing.py."""
    return (Decimal(prompt) * Decimal("2.5") + Decimal(completion) * 10) / Decimal(10**6)


@pytest.fixture(params=["files", "postgres"])
def backend(request: pytest.FixtureRequest, rig: Rig) -> Any:
    """The rig's store: the state dir, or a fresh migrated PostgreSQL database."""
    if request.param == "postgres":
        dsn = migrated(request.getfixturevalue("pg_dsn"))
        rig.extra_config += f"\nstore: {{backend: postgres, dsn: '{dsn}'}}\n"
    yield request.param
    rig.close()


def details(comment: str) -> str:
    """The "What I did" section of a comment ("" when it has none)."""
    match = re.search(
        r"<details><summary>What I did</summary>\n\n(.*?)\n\n</details>", comment, re.S
    )
    return match.group(1) if match else ""


def show(
    rig: Rig, tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    config = rig.config_file(tmp_path / "show.yaml")
    capsys.readouterr()
    code = main(["show", "-c", str(config), *args])
    out, err = capsys.readouterr()
    return code, out, err


def demo_run(rig: Rig) -> Any:
    rig.extra_config = JAIL + rig.extra_config
    rig.llm_options = PRICE
    thread = rig.issue(title="Say hello", body="src/app.py should print hello instead of hi.")
    rig.comment(thread, "Please keep it short.")
    rig.model.policy = scripted(*DEMO)
    rig.run_once()
    assert rig.state(thread).status is Status.DONE, rig.bot_comments(thread)
    return thread


def test_a_demo_run_says_what_it_did_and_bot_show_prints_that_run(
    rig: Rig, backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thread = demo_run(rig)
    state = rig.state(thread)
    usage = state.usage
    spent = shown(cost(usage.prompt_tokens, usage.completion_tokens), "EUR")

    final = rig.bot_comments(thread)[-1]
    assert re.search(r"</details>\n\n<!-- bot:[^>]*-->$", final)  # the comment ends with it
    said = details(final).splitlines()
    assert said[0].startswith("- Steps: 6 model calls in ")
    assert said[1:] == [
        f"- Tokens: {usage.total:,} ({usage.prompt_tokens:,} prompt, "
        f"{usage.completion_tokens:,} completion), cost {spent}",
        "- Tools called: `read_file` (2), `edit_file` (1), `finish` (1), `run_command` (1),"
        " `update_plan` (1)",
        "- Files read: `src/app.py`",
        "- Files changed: `src/app.py`",
        f"- Commands: `{COMMAND}`: passed",
        said[6],
        "- Comments heard: 1, from `alice`",
    ]
    assert re.fullmatch(r"- Checks ran: `python3 src/app.py`: passed \(\d+\.\d s\)", said[6])
    assert PRINTED not in final

    code, out, _ = show(rig, tmp_path, capsys, str(rig.key(thread)))
    assert code == 0
    assert out.startswith(f"{rig.key(thread)}  run 1 of 1  done\n")
    assert "cost EUR" in out.splitlines()[3]
    replies = [e for e in rig.conversation(thread) if e.get("kind") == "reply"]
    assert len(replies) == 6
    rows = [line for line in out.splitlines() if re.match(r"\d\d:\d\d:\d\d  reply ", line)]
    for entry, row in zip(replies, rows, strict=True):
        p, c = entry["usage"]["prompt_tokens"], entry["usage"]["completion_tokens"]
        assert f" {p:,}+{c:,} " in row and shown(cost(p, c), "").strip() in row
    assert sum(e["usage"]["prompt_tokens"] for e in replies) == usage.prompt_tokens
    assert (
        f"run 1: 6 model calls, {usage.total:,} tokens ({usage.prompt_tokens:,} prompt, "
        f"{usage.completion_tokens:,} completion), {spent}"
    ) in out
    assert re.search(r"  checks_run  checks .* checks: python3 src/app.py: passed", out)
    assert re.search(r"  published   bot .* draft change request http", out)


# The documented shape (README, "What it did, and what it cost"), per entry kind too.
SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "bot-show.schema.json").read_text())


@pytest.mark.parametrize("platform", ["github"])
def test_bot_show_json_has_the_documented_keys_and_types(
    rig: Rig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thread = demo_run(rig)
    code, out, _ = show(rig, tmp_path, capsys, str(rig.key(thread)), "--json")
    assert code == 0
    data = json.loads(out)
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(data, SCHEMA, cls=jsonschema.Draft202012Validator)
    kinds = [e["kind"] for e in data["entries"]]
    assert {"system", "initial", "reply", "tool", "checks_run", "published", "posted"} <= set(kinds)
    assert kinds.count("status") == 2  # started, done
    priced = [Decimal(e["cost"]) for e in data["entries"] if e["cost"] is not None]
    assert len(priced) == 6 and sum(priced) == Decimal(data["totals"]["cost"])  # exact
    assert data["totals"]["currency"] == "EUR" and data["status"] == "done"
    assert all(e["at"] for e in data["entries"]) and data["busy_seconds"] > 0
    timed = [e for e in data["entries"] if e["kind"] in ("reply", "tool", "checks_run")]
    assert len(timed) == 13 and all(e["duration"] is not None for e in timed)


def test_bot_show_run_1_after_a_second_run(
    rig: Rig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.llm_options = PRICE
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    rig.model.policy = scripted(
        call("edit_file", path="src/app.py", old="'hi'", new="'hello'"),
        call("finish", summary="First pass."),
    )
    rig.run_once()
    rig.set_labels(thread, ["coding agent done", "coding agent"])
    rig.comment(thread, "Please also add a newline at the end of README.md.")
    rig.model.policy = scripted(
        call("write_file", path="README.md", content="# app\n\n"),
        call("finish", summary="Second pass."),
    )
    rig.run_once()
    assert rig.state(thread).run == 2
    key = str(rig.key(thread))

    runs = {}
    for args in ((key, "--json", "--run", "1"), (key, "--json")):
        code, out, _ = show(rig, tmp_path, capsys, *args)
        assert code == 0
        runs[json.loads(out)["run"]] = json.loads(out)
        jsonschema.validate(json.loads(out), SCHEMA, cls=jsonschema.Draft202012Validator)
    targets = {
        n: {e["detail"].get("target") for e in run["entries"] if e["kind"] == "tool"}
        for n, run in runs.items()
    }
    assert targets == {1: {"src/app.py", None}, 2: {"README.md", None}}
    assert runs[1]["status"] == "done" and runs[1]["runs"] == 2  # its end, from its entries
    first, second = runs[1]["totals"], runs[2]["totals"]
    assert first["calls"] == second["calls"] == 2
    assert runs[2]["task_totals"]["tokens"] == first["tokens"] + second["tokens"]
    assert Decimal(runs[2]["task_totals"]["cost"]) == Decimal(first["cost"]) + Decimal(
        second["cost"]
    )
    final = rig.bot_comments(thread)[-1]
    assert f"; all 2 runs: {runs[2]['task_totals']['tokens']:,} (" in details(final)

    code, out, _ = show(rig, tmp_path, capsys, key, "--run", "1")
    assert code == 0 and out.startswith(f"{key}  run 1 of 2  done")
    code, out, err = show(rig, tmp_path, capsys, key, "--run", "3")
    assert code == 1 and out == "" and "there is no run 3" in err
    code, out, err = show(rig, tmp_path, capsys, "github:acme/app#999")
    assert code == 1 and "no task github:acme/app#999" in err

    capsys.readouterr()
    assert main(["status", "-c", str(rig.config_file(tmp_path / "status.yaml"))]) == 0
    status = capsys.readouterr().out.splitlines()
    assert "cost EUR" in status[0]
    task_cost = shown(Decimal(runs[2]["task_totals"]["cost"]), "").strip()
    assert task_cost in next(line for line in status if line.startswith(key))


def test_a_restart_in_the_middle_keeps_the_timeline_whole(rig: Rig, backend: str) -> None:
    rig.llm_options = PRICE
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    steps = scripted(*DEMO[:3], DEMO[-1])

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        if len(rig.model.requests) == 2:
            rig.stop.set()  # the daemon stops while the model answers: its tool call waits
        return steps(request)  # type: ignore[no-any-return]

    rig.model.policy = policy
    rig.run_once()
    assert rig.state(thread).status is Status.RUNNING
    rig.stop.clear()
    rig.run_once()  # a new Daemon over the same store
    state = rig.state(thread)
    assert state.status is Status.DONE

    timeline = build_timeline(rig.store(), rig.key(thread), price=rig.settings.llm.price)
    replies = [e for e in timeline.entries if e.kind == "reply"]
    tools = [e for e in timeline.entries if e.kind == "tool"]
    assert [e.detail["name"] for e in tools] == ["update_plan", "read_file", "edit_file", "finish"]
    assert len(replies) == 4 == len(rig.model.requests)
    # Each reply's tokens are what the scripted server reported for that request.
    for entry, request in zip(replies, rig.model.requests, strict=True):
        chars = sum(len(str(m.get("content") or "")) for m in request["messages"])
        assert entry.prompt_tokens == chars // 4 + 1
    assert sum(e.prompt_tokens or 0 for e in replies) == state.usage.prompt_tokens
    assert timeline.totals.tokens == state.usage.total and timeline.totals.calls == 4
    assert sum(e.cost or 0 for e in replies) == timeline.totals.cost
    assert all(e.duration is not None for e in replies + tools)  # each call, timed
    stamps = [e.at for e in timeline.entries]
    assert None not in stamps and stamps == sorted(stamps)  # type: ignore[type-var]
    assert [e.kind for e in timeline.entries].count("initial") == 1
    assert [e.detail.get("status") for e in timeline.entries if e.kind == "status"] == [
        "running",
        "done",
    ]


@pytest.mark.parametrize("platform", ["gitlab"])
def test_an_internal_note_never_reaches_the_report(rig: Rig) -> None:
    rig.extra_config = JAIL
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    rig.forge.world.add_internal_note("acme/app", thread.number, SECRET, kind="issue")
    rig.comment(thread, "Looks fine to me.", author="bob")  # public, from a reader
    rig.model.policy = scripted(
        call("run_command", command=f"echo '{SECRET}'"),  # the model repeats the note
        call("finish", summary="Nothing to change."),
    )
    rig.run_once()
    final = rig.bot_comments(thread)[-1]
    said = details(final)
    assert "- Comments heard: 1, from `bob`" in said.splitlines()  # the note: not even counted
    assert f"- Commands: `echo '{WITHHELD}'`: passed" in said.splitlines()
    assert not leaks(final) and not any(piece in final.lower() for piece in PIECES)


def test_agent_report_false_leaves_the_section_out(rig: Rig) -> None:
    rig.extra_config = "agent: {report: false}"
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    rig.model.policy = scripted(call("finish", summary="Nothing to change."))
    rig.run_once()
    final = rig.bot_comments(thread)[-1]
    assert final.startswith("Nothing to change.") and "<details>" not in final
    assert "What I did" not in final
    kinds = [e.get("kind") for e in rig.conversation(thread)]
    assert "reply" in kinds and "posted" in kinds  # still recorded: only the section is off


@pytest.mark.parametrize("platform", ["github"])
def test_token_and_cost_counters_move_with_each_model_call(rig: Rig) -> None:
    rig.llm_options = PRICE
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    rig.model.policy = scripted(*DEMO[:3], DEMO[-1])
    metrics = Metrics()
    settings = rig.settings
    daemon = build_daemon(
        settings, rig.stop, sources=build_sources(settings, rig.stop), metrics=metrics
    )
    daemon.initialize()
    try:
        daemon.run_once()
    finally:
        daemon.close()
    usage = rig.state(thread).usage
    sample = metrics.registry.get_sample_value
    assert sample("bot_llm_tokens_total", {"kind": "prompt"}) == usage.prompt_tokens
    assert sample("bot_llm_tokens_total", {"kind": "completion"}) == usage.completion_tokens
    spent = sample("bot_llm_cost_total", {"currency": "EUR"})
    assert spent == pytest.approx(float(cost(usage.prompt_tokens, usage.completion_tokens)))
    assert spent is not None and spent > 0
