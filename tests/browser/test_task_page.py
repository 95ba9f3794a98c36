"""The task page in a real browser: `bot sandbox`'s daemon and page (`bot_sandbox/demo.py`
`Sandbox`), a demo thread holding hostile HTML, and headless Chromium (Debian's `chromium`,
`sh scripts/system-deps` installs it) started by the test: `--dump-dom` gives the DOM after the
page loaded and any script ran, `--screenshot` a picture of it.

The task, every timeline entry, the tokens and the cost are in the DOM; the hostile comment
shows as text, and nothing of it became an element or ran (the title is the page's own); the
page asks for the password. `UPDATE_SCREENSHOT=1` keeps the screenshot as docs/task-page.png.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.core.pricing import shown
from bot.model.thread import Kind, Platform, TaskKey
from bot.task.timeline import build_timeline
from bot_sandbox.demo import Sandbox
from tests.browser.dom import Dom

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "correct horse battery staple"
HOSTILE = (
    "<script>document.title='pwned'</script>"
    "<img src=x onerror=\"document.title='pwned';document.body.dataset.pwned=1\">"
    "<b id=injected>bold</b>"
)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium not found: `sh scripts/system-deps` installs Debian's chromium")
    return found


class Browser:
    def __init__(self, binary: str, profile: Path) -> None:
        self.binary, self.profile = binary, profile

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            [
                self.binary,
                "--headless",
                "--no-sandbox",  # as root (CI, containers) Chromium's own sandbox cannot start
                "--disable-gpu",
                f"--user-data-dir={self.profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def dom(self, url: str) -> Dom:
        return Dom(self._run("--dump-dom", url))

    def screenshot(self, url: str, path: Path) -> None:
        self._run(f"--screenshot={path}", "--window-size=1280,1600", url)


def with_password(url: str) -> str:
    return url.replace("http://", f"http://reader:{PASSWORD.replace(' ', '%20')}@", 1)


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox(tmp_path / "sandbox", password=PASSWORD) as sandbox:
        github = sandbox.threads[0]
        # A writer's comment: it reaches the model (and the page) in the opening context.
        sandbox.forge.world.add_comment("github", "demo/app", github.number, HOSTILE)
        sandbox.daemon.run_once()
        yield sandbox


def test_the_task_page_in_chromium_shows_the_run_and_keeps_hostile_html_inert(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    browser = Browser(chromium(), tmp_path / "profile")
    key = TaskKey(Platform.GITHUB, "demo/app", Kind.ISSUE, sandbox.threads[0].number)
    timeline = build_timeline(sandbox.daemon.store, key, price=sandbox.settings.llm.price)
    assert timeline.status == "done" and timeline.totals.cost is not None
    url = sandbox.page_of("github", sandbox.threads[0])

    page = browser.dom(with_password(url))

    assert page.by_id["task"] == str(key)
    assert page.by_id["status"] == "done"
    assert page.kinds == [entry.kind for entry in timeline.entries]
    assert page.by_id["tokens"].startswith(f"{timeline.totals.tokens:,} ")
    assert page.by_id["cost"] == shown(timeline.totals.cost, "USD")
    calls = [e for e in timeline.entries if e.prompt_tokens is not None]
    assert len(calls) == timeline.totals.calls
    for call in calls:  # each model call's tokens and cost in its row
        assert f"{call.prompt_tokens:,}+{call.completion_tokens or 0:,}" in page.text
        assert call.cost is not None and shown(call.cost, "USD") in page.text
    # The hostile comment is on the page as the text it is ...
    assert HOSTILE in page.text
    # ... and none of it became an element, an event handler, or ran.
    assert page.title == f"{key} · coding-agent-bot"
    assert page.tags["script"] == 0 and page.tags["img"] == 0
    assert "injected" not in page.ids
    assert not [name for name, _ in page.attributes if name.startswith("on")]
    assert not [name for name, _ in page.attributes if name == "data-pwned"]

    listing = browser.dom(with_password(sandbox.page_url + "/"))
    assert listing.task_rows == 2
    assert str(key) in listing.text and "gitlab:demo/app#1" in listing.text

    shot = tmp_path / "task-page.png"
    browser.screenshot(with_password(url), shot)
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    if os.environ.get("UPDATE_SCREENSHOT"):
        shutil.copyfile(shot, ROOT / "docs" / "task-page.png")


def test_the_page_asks_chromium_for_the_password(sandbox: Sandbox, tmp_path: Path) -> None:
    browser = Browser(chromium(), tmp_path / "profile")
    url = sandbox.page_of("github", sandbox.threads[0])

    page = browser.dom(url)  # no password: nothing of the task

    assert "github:demo/app#1" not in page.text and "task" not in page.ids
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=10)
    assert refused.value.code == 401
    assert refused.value.headers["WWW-Authenticate"].startswith("Basic realm=")
