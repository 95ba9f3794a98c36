"""The task page over real HTTP (a waitress listener on 127.0.0.1, a files store): forge text
escaped, the list's filters, the password (401 / 200, compared in constant time), the security
headers on every answer, the refresh only while a task runs, and the read-only edges."""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
import requests

from bot.core.clock import FakeClock
from bot.core.pricing import Price, shown
from bot.model.state import PlanItem, Status, Usage
from bot.model.thread import TaskKey
from bot.service.listener import Listener
from bot.service.ui.auth import BasicAuth
from bot.service.ui.links import ForgeLinks
from bot.service.ui.wsgi import PageApp
from bot.store.files import FileStore
from bot.task.page_link import task_path
from bot.task.record import Stamped
from tests.browser.dom import Dom
from tests.store.helpers import KEY, file_store, state

EVIL = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>"
PRICE = Price(input_per_million=Decimal(2), output_per_million=Decimal(8), currency="EUR")
LINKS = ForgeLinks(github="https://github.example", gitlab="https://gitlab.example")
CLOCK = FakeClock(datetime(2025, 7, 1, 12, 0, 0, tzinfo=UTC), step=1)


@dataclass
class Page:
    store: FileStore
    url: str

    def get(self, path: str, **kwargs: object) -> requests.Response:
        return requests.get(self.url + path, timeout=10, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Page]]:
    listeners: list[Listener] = []
    store = file_store(tmp_path / "state")

    def start(password: str | None = None) -> Page:
        auth = BasicAuth(password) if password is not None else None
        app = PageApp(store, LINKS, PRICE, auth)
        listener = Listener(app, "127.0.0.1:0", serves=("ui",), max_body=65536).start()
        listeners.append(listener)
        return Page(store, listener.url)

    yield start
    for listener in listeners:
        listener.stop()
    store.close()


def hostile_task(store: FileStore, status: Status = Status.RUNNING) -> None:
    """A task whose every forge- or model-made text is hostile HTML."""
    store.save(
        state(
            status=status,
            step=1,
            usage=Usage(calls=1, prompt_tokens=1000, completion_tokens=100),
            plan=[PlanItem(text=f"plan {EVIL}")],
            change_request_url="javascript:alert(1)",
        )
    )
    log = Stamped(store.conversation(KEY), CLOCK)
    author = "<b onmouseover=alert(1)>mallory</b>"
    log.append({"role": "user", "kind": "initial", "content": f"# Issue {EVIL}"})
    log.append(
        {
            "role": "user",
            "kind": "comments",
            "content": f"[New Comment from @{author}] {EVIL}",
            "comments": [{"id": "7", "author": author}],
        }
    )
    log.append(
        {
            "role": "assistant",
            "kind": "reply",
            "content": f"done {EVIL}",
            "step": 1,
            "usage": {"prompt_tokens": 1000, "completion_tokens": 100},
            "duration": 1.5,
        }
    )


def test_forge_and_model_text_is_escaped_on_the_task_page(serve: Callable[..., Page]) -> None:
    page = serve()
    hostile_task(page.store)

    answer = page.get(task_path(KEY))

    assert answer.status_code == 200
    assert "<script" not in answer.text and "<img" not in answer.text
    assert "&lt;script&gt;" in answer.text
    dom = Dom(answer.text)
    assert dom.tags["script"] == 0 and dom.tags["img"] == 0 and dom.tags["b"] == 0
    assert not [name for name, _ in dom.attributes if name.startswith("on")]
    assert f"done {EVIL}" in dom.text and f"plan {EVIL}" in dom.text  # shown, as text
    # A forge's address that is not http(s) is no link.
    assert not [v for n, v in dom.attributes if n == "href" and "javascript" in v.lower()]
    assert dom.by_id["thread"] == "the thread" and "request" not in dom.ids
    # The run's tokens and cost at the price given.
    assert dom.by_id["tokens"].startswith("1,100 (1,000 prompt, 100 completion)")
    assert dom.by_id["cost"] == shown(Decimal("0.0028"), "EUR")
    assert dom.kinds == ["initial", "comments", "reply"]


def test_the_list_filters_by_status_and_repository(serve: Callable[..., Page]) -> None:
    page = serve()
    tasks = {
        "github:acme/app#1": Status.RUNNING,
        "github:acme/other#2": Status.DONE,
        "gitlab:acme/app#3": Status.PAUSED,
    }
    for key, status in tasks.items():
        page.store.save(
            state(key, status, usage=Usage(calls=1, prompt_tokens=500, completion_tokens=50))
        )

    def listed(query: str) -> set[str]:
        answer = page.get("/" + query)
        assert answer.status_code == 200
        return set(re.findall(r'<a href="/tasks/[^"]+">([^<]+)</a>', answer.text))

    assert listed("") == set(tasks)
    assert listed("?status=done") == {"github:acme/other#2"}
    assert listed("?repo=github:acme/app") == {"github:acme/app#1"}
    assert listed("?repo=acme/app") == {"github:acme/app#1", "gitlab:acme/app#3"}
    assert listed("?status=paused&repo=acme/app") == {"gitlab:acme/app#3"}
    assert listed("?status=failed") == set()
    every = page.get("/").text
    assert 'href="https://github.example/acme/app/issues/1"' in every
    assert 'href="https://gitlab.example/acme/app/-/issues/3"' in every
    assert every.count(shown(Decimal("0.0014"), "EUR")) == 3  # 500 x 2 + 50 x 8 per million


def test_the_password_is_asked_for_and_compared_in_constant_time(
    serve: Callable[..., Page], monkeypatch: pytest.MonkeyPatch
) -> None:
    page = serve(password="s3cret pass")
    hostile_task(page.store)
    compared: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)

    for path in ("/", task_path(KEY)):
        refused = page.get(path)
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"].startswith('Basic realm="coding-agent-bot"')
        assert "mallory" not in refused.text and "1,100" not in refused.text
        assert page.get(path, auth=("anyone", "wrong")).status_code == 401
        assert page.get(path, auth=("anyone", "s3cret pass")).status_code == 200
    # Every password given was compared by hmac.compare_digest, none any other way.
    assert len(compared) == 4


def test_every_answer_forbids_scripts_frames_and_foreign_resources(
    serve: Callable[..., Page],
) -> None:
    page = serve()
    hostile_task(page.store)
    answers = [
        page.get("/"),
        page.get(task_path(KEY)),
        page.get("/nowhere"),
        requests.post(page.url + "/", timeout=10),
    ]
    assert [a.status_code for a in answers] == [200, 200, 404, 405]
    for answer in answers:
        policy = answer.headers["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["default-src"] == "'none'"
        assert "script-src" not in directives  # no script, from anywhere
        assert directives["frame-ancestors"] == "'none'"
        nonce = re.fullmatch(r"'nonce-([\w-]+)'", directives["style-src"])
        assert nonce is not None and f'<style nonce="{nonce.group(1)}">' in answer.text
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.headers["Referrer-Policy"] == "no-referrer"
        assert answer.headers["Content-Type"] == "text/html; charset=utf-8"
    nonces = {a.headers["Content-Security-Policy"] for a in answers[:2]}
    assert len(nonces) == 2  # a new nonce every answer


def test_the_page_refreshes_itself_only_while_the_task_runs(serve: Callable[..., Page]) -> None:
    page = serve()
    hostile_task(page.store, Status.RUNNING)
    assert '<meta http-equiv="refresh"' in page.get(task_path(KEY)).text
    assert '<meta http-equiv="refresh"' in page.get("/").text
    page.store.save(state(status=Status.PAUSED, step=1))
    assert '<meta http-equiv="refresh"' not in page.get(task_path(KEY)).text
    assert '<meta http-equiv="refresh"' not in page.get("/").text


def test_it_only_reads_and_names_what_is_not_there(serve: Callable[..., Page]) -> None:
    page = serve()
    hostile_task(page.store)
    assert requests.post(page.url + task_path(KEY), timeout=10).headers["Allow"] == "GET, HEAD"
    other = TaskKey.parse("github:acme/app#99")
    assert page.get(task_path(other)).status_code == 404
    assert page.get(task_path(KEY) + "?run=x").status_code == 400
    assert page.get(task_path(KEY) + "?run=2").status_code == 404
    assert page.get("/tasks/github/acme/app/merge_request/1").status_code == 404
    head = requests.head(page.url + task_path(KEY), timeout=10)
    assert head.status_code == 200 and head.content == b""
