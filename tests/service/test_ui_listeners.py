"""The task page served by the daemon (`bot/app.py` through `bot/service/listeners.py`): on
its own port, or on the webhooks' when `ui.listen` is the same address (one listener: the
webhooks keep their paths and answers, the page takes the rest); a taken port is a
configuration error naming `ui.listen`; and with `ui.public_url` the final comment links to
the task's page."""

from __future__ import annotations

import socket

import pytest
import requests

from bot.app import Application, ListenError
from bot.task.page_link import page_url
from tests.rig import Rig
from tests.test_agent_e2e import call, scripted


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("platform", ["github"])
def test_one_listener_serves_the_webhooks_and_the_page_at_one_address(rig: Rig) -> None:
    port = free_port()
    rig.extra_config = (
        f"webhooks: {{listen: '127.0.0.1:{port}', github_secret: s3cret}}\n"
        f"ui: {{listen: '127.0.0.1:{port}'}}\n"
    )
    with Application(rig.settings, once=False):
        base = f"http://127.0.0.1:{port}"
        page = requests.get(base + "/", timeout=10)
        assert page.status_code == 200 and "<h1>Tasks</h1>" in page.text
        hook = requests.post(base + "/webhooks/github", data=b"{}", timeout=10)
        assert (hook.status_code, hook.text) == (401, "unsigned\n")  # the webhooks' own answer
        assert requests.post(base + "/webhooks/gitlab", data=b"{}", timeout=10).status_code == 404


@pytest.mark.parametrize("platform", ["github"])
def test_the_page_on_its_own_port_beside_the_webhooks(rig: Rig) -> None:
    hooks, ui = free_port(), free_port()
    rig.extra_config = (
        f"webhooks: {{listen: '127.0.0.1:{hooks}', github_secret: s3cret}}\n"
        f"ui: {{listen: '127.0.0.1:{ui}'}}\n"
    )
    with Application(rig.settings, once=False):
        assert requests.get(f"http://127.0.0.1:{ui}/", timeout=10).status_code == 200
        hook = requests.get(f"http://127.0.0.1:{hooks}/", timeout=10)
        assert hook.status_code == 404 and "Tasks" not in hook.text  # no page there


@pytest.mark.parametrize("platform", ["github"])
def test_a_taken_page_port_is_refused_naming_ui_listen(rig: Rig) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        rig.extra_config = f"ui: {{listen: '127.0.0.1:{taken.getsockname()[1]}'}}\n"
        with pytest.raises(ListenError) as refused, Application(rig.settings, once=False):
            pytest.fail("started although the page's port is taken")
    assert refused.value.key == "ui.listen"


def test_the_final_comment_links_to_the_task_page_under_public_url(rig: Rig) -> None:
    rig.extra_config = "ui: {public_url: 'https://bot.example/ci/'}\n"
    rig.model.policy = scripted(call("finish", summary="Nothing to change."))
    thread = rig.issue()
    rig.run_once()
    final = rig.bot_comments(thread)[-1]
    link = page_url("https://bot.example/ci/", rig.key(thread))
    assert link == f"https://bot.example/ci/tasks/{rig.platform}/acme/app/issue/{thread.number}"
    assert f"Every step, with tokens and cost: {link}" in final
    assert final.index(link) < final.index("<details><summary>What I did")


def test_without_public_url_the_final_comment_has_no_page_link(rig: Rig) -> None:
    rig.model.policy = scripted(call("finish", summary="Nothing to change."))
    thread = rig.issue()
    rig.run_once()
    assert "/tasks/" not in rig.bot_comments(thread)[-1]
