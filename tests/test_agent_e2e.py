"""The agent end to end: an issue asking for a change ends with a branch, a commit and a draft
pull/merge request, on GitHub and GitLab, with the real clients against the emulators."""

from __future__ import annotations

import json
from typing import Any

from bot.context.tokens import TokenCounter
from bot.model.state import Status
from bot.task.cap_note import CAP_HEADER
from bot_sandbox.llm_server import Scripted, count_tool_results
from tests.conftest import REPO
from tests.rig import Rig

DONE = "coding agent done"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [(name, arguments)]}


def scripted(*steps: dict[str, Any]) -> Any:
    def policy(request: dict[str, Any]) -> dict[str, Any]:
        return steps[min(count_tool_results(request), len(steps) - 1)]

    return policy


CHANGE = (
    call("update_plan", items=[{"text": "Read src/app.py"}, {"text": "Print hello"}]),
    call("list_files", path=".", depth=2),
    call("read_file", path="src/app.py"),
    call("search_code", pattern=r"print\(", path_glob="src/**"),
    call("edit_file", path="src/app.py", old="print('hi')", new="print('hello')"),
    call("write_file", path="docs/CHANGES.md", content="- greet with hello\n"),
    call("finish", summary="src/app.py now prints hello; noted in docs/CHANGES.md."),
)


def requests_fit(rig: Rig, window: int) -> None:
    counter = TokenCounter("cl100k_base")
    for request in rig.model.requests:
        tools = counter.tools(request.get("tools") or [])
        assert counter.messages(request["messages"]) + tools <= window


def test_issue_to_draft_change_request(rig: Rig) -> None:
    thread = rig.issue(title="Say hello", body="src/app.py should print hello instead of hi.")
    rig.model.policy = scripted(*CHANGE)
    rig.run_once()

    repo = rig.forge.world.repo(rig.platform, REPO)
    branch = f"bot/{thread.number}-say-hello"
    files = repo.files(branch)
    assert files is not None
    assert files["src/app.py"] == b"print('hello')\n"
    assert files["docs/CHANGES.md"] == b"- greet with hello\n"
    assert repo.files("main") == {"README.md": b"# app\n", "src/app.py": b"print('hi')\n"}
    head = repo.commits[repo.branches[branch]]
    assert head.parents == [repo.branches["main"]]  # one commit on top of the pinned commit
    requests = [t for t in repo.threads.values() if t.change is not None]
    assert len(requests) == 1
    change = requests[0].change
    assert change is not None and change.draft and change.head == branch and change.base == "main"
    assert f"Closes #{thread.number}" in change.body and "`src/app.py`" in change.body

    final = rig.bot_comments(thread)[-1]
    assert final.startswith("src/app.py now prints hello") and "Draft change request" in final
    assert thread.labels == [DONE]
    progress = rig.bot_comments(thread)[0]
    assert "- [ ] Read src/app.py" in progress  # one progress comment, made by update_plan

    seen = rig.model.seen_text()
    assert "src/app.py should print hello" in seen  # the issue
    assert "## Repository tree" in seen and "README" in seen  # repository context
    tool_results = [e["content"] for e in rig.conversation(thread) if e.get("role") == "tool"]
    assert len(tool_results) == len(CHANGE)
    for result in tool_results[:-1]:
        assert result in seen  # the model saw every tool result
    assert "1| print('hi')" in seen
    requests_fit(rig, 8192)
    state = rig.state(thread)
    assert state.usage.calls == len(CHANGE) and state.usage.prompt_tokens > 0


def test_finish_without_changes_opens_nothing(rig: Rig) -> None:
    thread = rig.issue(title="Question", body="What does src/app.py do?")
    rig.model.policy = scripted(
        call("read_file", path="src/app.py"), call("finish", summary="It prints hi.")
    )
    rig.run_once()
    repo = rig.forge.world.repo(rig.platform, REPO)
    assert list(repo.branches) == ["main"]
    assert rig.bot_comments(thread)[-1].startswith("It prints hi.")


def test_retrigger_continues_on_the_same_branch_and_request(rig: Rig) -> None:
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    rig.model.policy = scripted(
        call("edit_file", path="src/app.py", old="'hi'", new="'hello'"),
        call("finish", summary="First pass."),
    )
    rig.run_once()
    rig.set_labels(thread, [DONE, "coding agent"])
    rig.comment(thread, "Please also add a newline at the end of README.md.")
    rig.model.policy = scripted(
        call("write_file", path="README.md", content="# app\n\n"),
        call("finish", summary="Second pass."),
    )
    rig.run_once()
    repo = rig.forge.world.repo(rig.platform, REPO)
    branch = f"bot/{thread.number}-say-hello"
    files = repo.files(branch)
    assert (
        files is not None
        and files["src/app.py"] == b"print('hello')\n"
        and files["README.md"] == b"# app\n\n"
    )
    assert len([t for t in repo.threads.values() if t.change is not None]) == 1
    assert "First pass." in str(rig.model.requests[-1]["messages"])  # inherited summary
    assert rig.state(thread).run == 2 and thread.labels == [DONE]


def test_push_to_existing_change_request_branch_when_allowed(rig: Rig) -> None:
    rig.extra_config = "agent: {push_to_existing_branches: true}"
    kind = "pull" if rig.platform == "github" else "mr"
    thread = rig.issue(kind=kind, title="Fix typo", body="fix src/app.py", head_ref="typo")
    rig.model.policy = scripted(
        call("edit_file", path="src/app.py", old="hi", new="hey"), call("finish", summary="Done.")
    )
    rig.run_once()
    repo = rig.forge.world.repo(rig.platform, REPO)
    files = repo.files("typo")
    assert files is not None and files["src/app.py"] == b"print('hey')\n"
    assert sorted(repo.branches) == ["main", "typo"]  # no new branch, no new request
    assert "Pushed commit" in rig.bot_comments(thread)[-1]


def test_model_without_tool_calling_uses_the_prompt_fallback(rig: Rig) -> None:
    rig.llm_options = ", tool_calling: prompt"
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")

    def fenced(name: str, **arguments: Any) -> dict[str, Any]:
        block = json.dumps({"tool": name, "arguments": arguments})
        return {"content": f"I will use a tool.\n```json\n{block}\n```"}

    replies = [
        fenced("edit_file", path="src/app.py", old="'hi'", new="'hello'"),
        fenced("finish", summary="Changed it without native tools."),
    ]

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        assert "tools" not in request  # the server "does not know" tools
        done = sum(
            1 for m in request["messages"] if str(m.get("content", "")).startswith("[tool result]")
        )
        return replies[min(done, 1)]

    rig.model.policy = policy
    rig.run_once()
    assert "You cannot call functions natively" in rig.model.requests[0]["messages"][0]["content"]
    assert rig.bot_comments(thread)[-1].startswith("Changed it without native tools.")
    files = rig.forge.world.repo(rig.platform, REPO).files(f"bot/{thread.number}-say-hello")
    assert files is not None and files["src/app.py"] == b"print('hello')\n"


def test_llm_429_and_500_are_retried_honouring_retry_after(rig: Rig) -> None:
    thread = rig.issue()
    rig.model.push(
        Scripted(status=429, headers={"retry-after": "1"}),
        Scripted(status=500),
    )
    rig.model.policy = scripted(call("finish", summary="ok"))
    rig.llm_options = ", max_retries: 3"
    rig.run_once()
    assert len(rig.model.requests) == 3
    # The retry after the 429 reached the emulator no sooner than its `retry-after: 1` allowed
    # (the emulator's own arrival log; a slow machine can only make the gap longer).
    assert rig.model.arrived[1] - rig.model.arrived[0] >= 1.0
    assert thread.labels == [DONE]


def test_llm_400_is_not_retried_and_fails_the_task_clearly(rig: Rig) -> None:
    thread = rig.issue()
    rig.model.push(Scripted(status=400))
    rig.llm_options = ", max_retries: 3"
    rig.run_once()
    assert len(rig.model.requests) == 1
    assert thread.labels == ["coding agent failed"]
    assert "refused the request (400)" in rig.bot_comments(thread)[-1]


def test_unreachable_model_interrupts_then_fails_after_repeated_failures(rig: Rig) -> None:
    thread = rig.issue()
    rig.model.push(*[Scripted(status=503) for _ in range(20)])
    rig.llm_options = ", max_retries: 0"
    rig.run_once()
    assert rig.state(thread).status is Status.RUNNING  # a model outage is not the task's fault
    rig.run_once()
    rig.run_once()
    assert rig.state(thread).status is Status.FAILED
    assert "could not be reached" in rig.bot_comments(thread)[-1]


def test_token_cap_pauses_the_task_with_a_comment(rig: Rig) -> None:
    rig.llm_options = ", max_tokens_per_task: 1000"
    thread = rig.issue()
    rig.model.policy = scripted(call("read_file", path="README.md"))
    rig.run_once()
    assert thread.labels == ["coding agent paused"]
    state = rig.state(thread)
    assert state.status is Status.PAUSED and state.usage.total >= 1000
    said = rig.bot_comments(thread)[-1]
    assert said.startswith(CAP_HEADER + "token cap") and "`llm.max_tokens_per_task`" in said


def test_history_is_compacted_to_fit_a_small_window(rig: Rig) -> None:
    rig.llm_options = ", context_window: 3072, reserve_output_tokens: 256, max_steps: 30"
    big = "\n".join(f"line {i}: " + "word " * 12 for i in range(300))
    rig.forge.world.push(rig.platform, REPO, "main", {"big.txt": big}, "big file")
    thread = rig.issue(title="Read it", body="Look at big.txt")

    def policy(request: dict[str, Any]) -> dict[str, Any]:
        if "compress the work log" in str(request["messages"][0]["content"]):
            return {"content": "Read big.txt several times; nothing changed yet."}
        done = count_tool_results(request)
        summaries = [
            m for m in request["messages"] if "Summary of the earlier work" in str(m.get("content"))
        ]
        if summaries:
            return call("finish", summary="Compacted and finished.")
        return call("read_file", path="big.txt", start_line=1 + done * 40, end_line=40 + done * 40)

    rig.model.policy = policy
    rig.run_once()
    assert thread.labels == [DONE], rig.bot_comments(thread)
    summary_calls = [
        r for r in rig.model.requests if "compress the work log" in str(r["messages"][0]["content"])
    ]
    assert summary_calls and "tools" not in summary_calls[0]
    after = rig.model.requests[-1]["messages"]
    assert after[0]["role"] == "system" and "You are coding-bot" in after[0]["content"]
    assert any("Summary of the earlier work" in str(m.get("content")) for m in after)
    assert after[-1]["role"] == "tool"  # the newest turn is verbatim
    requests_fit(rig, 3072)


def test_slash_bot_from_a_writer_hands_a_finished_task_back(rig: Rig) -> None:
    thread = rig.issue(title="Say hello", body="src/app.py should print hello.")
    rig.model.policy = scripted(call("finish", summary="Nothing to do yet."))
    rig.run_once()
    rig.comment(thread, "/bot", author="bob")  # read access only: ignored
    rig.run_once()
    assert rig.state(thread).run == 1
    rig.comment(thread, "/bot\nPlease do it now.", author="alice")
    rig.model.policy = scripted(
        call("edit_file", path="src/app.py", old="'hi'", new="'hello'"),
        call("finish", summary="Done now."),
    )
    rig.run_once()
    assert rig.state(thread).run == 2 and thread.labels == [DONE]
    assert "Nothing to do yet." in str(rig.model.requests[-1]["messages"])  # previous summary
    assert "Please do it now." in str(rig.model.requests[-1]["messages"])  # the rest of the comment
    assert rig.bot_comments(thread)[-1].startswith("Done now.")
