"""Hole 6, second half: an endpoint that refuses a request as too long (HTTP 400, in the shapes
OpenAI, vLLM and llama.cpp send) gets a smaller request once; if that fails too, the failure
comment quotes the endpoint's reason. Real openai SDK against the scripted model server."""

from __future__ import annotations

from typing import Any

import pytest

from bot.agent.shrink import shrunk_limit
from bot.llm.base import ContextTooLong, LLMFatal
from bot.llm.openai_client import OpenAIClient
from bot_sandbox.llm_server import LLMServer, Scripted
from tests.rig import Rig

STYLES = ("openai", "vllm", "llamacpp")
LONG = [{"role": "user", "content": "word " * 400}]


@pytest.mark.parametrize("style", STYLES)
def test_each_endpoints_refusal_is_recognised_with_its_numbers(style: Any) -> None:
    with LLMServer() as server:
        server.context_window, server.refusal = 100, style
        client = OpenAIClient(server.url, "scripted-model", max_retries=0, max_output_tokens=20)
        with pytest.raises(ContextTooLong) as caught:
            client.complete(LONG, [])
    refusal = caught.value
    assert refusal.window == 100
    assert refusal.prompt == server.prompt_tokens(server.refused[0])
    assert refusal.completion == (20 if style == "vllm" else None)
    assert ("maximum context length is 100" in refusal.reason) or (
        "exceeds the available context size (100 tokens)" in refusal.reason
    )


def test_other_bad_requests_are_not_mistaken_for_a_long_prompt() -> None:
    with LLMServer() as server:
        body = {"error": {"message": "The model `x` does not exist", "code": "model_not_found"}}
        server.push(Scripted(status=400, body=body), Scripted(status=400, body=None))
        client = OpenAIClient(server.url, "x", max_retries=0)
        for _ in range(2):
            with pytest.raises(LLMFatal) as caught:
                client.complete(LONG, [])
            assert not isinstance(caught.value, ContextTooLong)


def test_shrunk_limit_follows_the_endpoints_numbers() -> None:
    # Our 4000 tokens were 5000 of theirs against a 4096 window, 1000 kept for the completion.
    vllm = ContextTooLong("x", window=4096, prompt=5000, completion=1000)
    assert shrunk_limit(4000, vllm) == int(4000 * 3096 / 5000 * 0.9)
    # No split given: a fifth of the window is kept for the answer.
    openai = ContextTooLong("x", window=4096, prompt=4200)
    assert shrunk_limit(4000, openai) == int(4000 * int(4096 * 0.8) / 4200 * 0.9)
    assert shrunk_limit(4000, ContextTooLong("x")) == 3000  # no numbers: a quarter off
    # Even numbers that claim it nearly fits shrink it by a tenth at least.
    assert shrunk_limit(4000, ContextTooLong("x", window=100_000, prompt=4001)) == 3600


BODY = "The login page fails after the second submit.\n" + "It shows a blank page. " * 350


@pytest.mark.parametrize("style", STYLES)
def test_a_refused_request_is_shrunk_and_retried_once(rig: Rig, style: Any) -> None:
    """The server's window is smaller than configured and its tokenizer counts more: the first
    request is refused; the retry fits and still holds the title, the first line and the
    newest comment; the rest of the run keeps to the size that worked."""
    rig.model.context_window, rig.model.token_ratio, rig.model.refusal = 3000, 1.3, style
    thread = rig.issue(title="Login breaks (title-marker)", body=BODY)
    for n in range(6):
        rig.comment(thread, f"Older note {n}: " + "more detail here. " * 40)
    rig.comment(thread, "Newest: please check logout too (newest-marker).")
    steps = [("read_file", {"path": "README.md"})] * 2 + [("finish", {"summary": "Fixed."})]
    rig.model.policy = lambda request: {"tool_calls": [steps.pop(0)]}
    rig.run_once()
    assert thread.labels == ["coding agent done"], rig.bot_comments(thread)
    # Refused once; the retry and every later call of the run keep to the learned size.
    assert len(rig.model.refused) == 1 and len(rig.model.requests) == 3
    assert all(rig.model.prompt_tokens(r) <= 3000 for r in rig.model.requests)
    refused, accepted = rig.model.refused[0], rig.model.requests[0]
    assert refused["messages"][0] == accepted["messages"][0]  # the same call, made smaller
    assert rig.model.prompt_tokens(accepted) <= 3000
    opening = str(accepted["messages"][1]["content"])
    assert "title-marker" in opening and "The login page fails after" in opening
    assert "newest-marker" in opening and "lines cut here to fit the context window" in opening


def test_a_second_refusal_fails_the_task_quoting_the_endpoint(rig: Rig) -> None:
    reason = (
        "This model's maximum context length is 4096 tokens. However, your messages resulted "
        "in 4200 tokens. Please reduce the length of the messages."
    )
    body = {"error": {"message": reason, "type": "invalid_request_error", "param": "messages"}}
    body["error"]["code"] = "context_length_exceeded"
    rig.model.push(Scripted(status=400, body=body), Scripted(status=400, body=body))
    thread = rig.issue(title="Login breaks", body=BODY)
    rig.run_once()
    assert thread.labels == ["coding agent failed"]
    assert len(rig.model.requests) == 2  # retried once, not more
    first, second = (rig.model.prompt_tokens(r) for r in rig.model.requests)
    assert second < first
    comment = rig.bot_comments(thread)[-1]
    assert f'"{reason}"' in comment and "shrunk to" in comment
    assert rig.state(thread).reason and reason in rig.state(thread).reason
