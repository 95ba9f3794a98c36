"""`bot sandbox`: the whole product against a local emulated forge and model, no token needed,
with the task page on 127.0.0.1."""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from bot.app import build_daemon
from bot.core import log as logging_setup
from bot.core.config import JailSettings, parse_settings
from bot.core.pricing import Price
from bot.jail.factory import jail_problem
from bot.model.thread import Kind, Platform, TaskKey
from bot.service.listeners import plan_listeners
from bot.service.show import Painter, render
from bot.service.ui import build_page
from bot.store.base import Store
from bot.task.page_link import page_url
from bot.task.timeline import TimelineError, build_timeline
from bot_sandbox.forge_server import ForgeServer
from bot_sandbox.llm_server import LLMServer, demo_policy
from bot_sandbox.world import SThread

DEMO_TOKEN = "sandbox-token-not-a-secret"

DEMO_FILES = {
    "README.md": "# demo\n\nA tiny project used by `bot sandbox`.\n",
    "demo/__init__.py": "",
    "demo/greet.py": 'def greet(name: str) -> str:\n    return "Hello " + name\n',
    "demo/test_greet.py": (
        "import unittest\n\nfrom demo.greet import greet\n\n\n"
        "class GreetTest(unittest.TestCase):\n"
        "    def test_punctuation(self) -> None:\n"
        '        self.assertEqual(greet("Ann"), "Hello Ann!")\n'
    ),
    # The repository names its checks; the bot runs them in the jail before it publishes.
    ".coding-agent.yml": "checks:\n  - python3 -m unittest -v demo.test_greet\n",
}


def seed(server: ForgeServer) -> list[SThread]:
    world = server.world
    world.add_user("coding-bot", token=DEMO_TOKEN)
    roles = {"alice": "write", "coding-bot": "write"}
    world.add_repo("github", "demo/app", files=DEMO_FILES, roles=roles)
    world.add_repo("gitlab", "demo/app", files=DEMO_FILES, roles=roles)
    body = "greet() should add an exclamation mark. Please fix demo/greet.py."
    return [
        world.add_thread(
            platform,
            "demo/app",
            title="Greeting lacks punctuation",
            body=body,
            labels=["coding agent"],
        )
        for platform in ("github", "gitlab")
    ]


# An example price for the scripted model, so that the demo shows costs (`llm.price`).
DEMO_PRICE = "{input_per_million: 0.15, output_per_million: 0.60, currency: USD}"


def sandbox_config(
    forge_url: str,
    llm_url: str,
    model: str,
    state_dir: Path,
    price: bool = True,
    ui: str = "",
) -> str:
    """`ui`: the `ui:` mapping's YAML (none: no task page)."""
    priced = f", price: {DEMO_PRICE}" if price else ""
    page = f"ui: {ui}\n" if ui else ""
    return f"""
state_dir: {state_dir}
poll_interval_seconds: 5
github:
  api_url: "{forge_url}"
  token: {DEMO_TOKEN}
  repositories: [demo/app]
  seconds_between_writes: 0
gitlab: {{url: "{forge_url}", token: {DEMO_TOKEN}, projects: [demo/app]}}
llm: {{base_url: "{llm_url}", model: "{model}", context_window: 8192{priced}}}
jail: {{enabled: {str(jail_works()).lower()}}}
{page}"""


def jail_works() -> bool:
    """The demo runs its checks in bubblewrap where it can; elsewhere it says they were not run."""
    return jail_problem(JailSettings(enabled=True)) is None


class ThreadPrinter:
    """Prints each demo thread as it evolves: new comments and label changes."""

    def __init__(self, forge: ForgeServer, threads: list[tuple[str, SThread]]) -> None:
        self.forge = forge
        self.threads = threads
        self.shown: dict[int, object] = {}  # comment id -> the version printed
        self.labels: dict[int, list[str]] = {}

    def show_new(self) -> None:
        with self.forge.world.lock:
            for platform, thread in self.threads:
                name = f"{platform} #{thread.number}"
                if self.labels.get(thread.id) != thread.labels:
                    self.labels[thread.id] = list(thread.labels)
                    print(f"[{name}] labels: {', '.join(thread.labels) or '(none)'}", flush=True)
                for comment in thread.comments:
                    seen = self.shown.get(comment.id)
                    if seen == comment.updated_at:
                        continue
                    edited = " (edited)" if seen is not None else ""
                    self.shown[comment.id] = comment.updated_at
                    body = MARKER.sub("", comment.body).strip()
                    indented = "\n".join(f"    {line}" for line in body.splitlines())
                    print(f"[{name}] @{comment.author.login}{edited}:\n{indented}", flush=True)

    def follow(self, done: threading.Event) -> None:
        while not done.wait(0.3):
            self.show_new()
        self.show_new()

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """The threads printed as they change while the block runs, and once more after."""
        done = threading.Event()
        watcher = threading.Thread(target=self.follow, args=(done,), daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            watcher.join()


MARKER = re.compile(r"<!-- bot:[^>]*-->")


def show_timelines(
    store: Store, threads: list[SThread], directory: Path, price: Price | None
) -> None:
    """What `bot show` prints for each demo task, and how to ask for it again."""
    paint = Painter(sys.stdout.isatty())
    for platform, thread in zip(("github", "gitlab"), threads, strict=True):
        key = TaskKey(Platform(platform), "demo/app", Kind.ISSUE, thread.number)
        print(f"\nsandbox: bot show -c {directory / 'sandbox.yaml'} '{key}'\n", flush=True)
        try:
            print(render(build_timeline(store, key, price=price), paint), flush=True)
        except TimelineError as exc:
            print(f"sandbox: {exc}", flush=True)


class Sandbox:
    """The emulated forges (seeded with the demo threads) and model, the daemon, and its task
    page on 127.0.0.1 (a free port, bound first so that `ui.public_url` names it and the final
    comments link to it). A context manager: everything it started is closed on exit.
    `password`: the page asks for it (`ui.password_file`, a file in `directory`)."""

    def __init__(
        self,
        directory: Path,
        llm_url: str | None = None,
        llm_model: str = "llama3.1",
        password: str | None = None,
    ) -> None:
        self.directory = directory
        self.llm_url, self.llm_model, self.password = llm_url, llm_model, password
        self.stop = threading.Event()
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Sandbox:
        try:
            self._open()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _open(self) -> None:
        stack = self._stack
        self.forge = stack.enter_context(ForgeServer())
        self.model = stack.enter_context(LLMServer(demo_policy()))
        self.threads = seed(self.forge)
        url, name = (
            (self.llm_url, self.llm_model) if self.llm_url else (self.model.url, self.model.model)
        )
        self.model_url = url
        page_socket = stack.enter_context(socket.create_server(("127.0.0.1", 0)))
        self.page_url = f"http://127.0.0.1:{page_socket.getsockname()[1]}"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_text = sandbox_config(
            self.forge.url, url, name, self.directory, self.llm_url is None, self._ui()
        )
        self.settings = parse_settings(self.config_text, {}, base_dir=self.directory)
        # For `bot show -c`; the page's port is this run's only.
        (self.directory / "sandbox.yaml").write_text(self.config_text, encoding="utf-8")
        self.daemon = build_daemon(self.settings, self.stop)
        stack.callback(self.daemon.close)
        self.daemon.initialize()
        page = build_page(self.settings, self.daemon.store)
        for planned in plan_listeners(self.settings, None, page, page_socket=page_socket):
            listener = planned.open()
            listener.start()
            stack.callback(listener.stop)

    def _ui(self) -> str:
        listen = self.page_url.removeprefix("http://")
        ui = f"{{listen: '{listen}', public_url: '{self.page_url}'"
        if self.password is not None:
            (self.directory / "ui-password").write_text(self.password + "\n", encoding="utf-8")
            ui += ", password_file: ui-password"
        return ui + "}"

    def page_of(self, platform: str, thread: SThread) -> str:
        key = TaskKey(Platform(platform), "demo/app", Kind.ISSUE, thread.number)
        return page_url(self.page_url, key)


def run_demo(
    state_dir: Path | None,
    llm_url: str | None = None,
    llm_model: str = "llama3.1",
    until_done: bool = False,
) -> int:
    logging_setup.configure("warning", stream=sys.stderr)
    directory = state_dir or Path(tempfile.mkdtemp(prefix="bot-sandbox-"))
    with Sandbox(directory, llm_url, llm_model) as sandbox:
        forge, threads, daemon = sandbox.forge, sandbox.threads, sandbox.daemon
        model = sandbox.model_url
        print(f"sandbox: forge {forge.url} (GitHub at /, GitLab at /api/v4), model {model}")
        print(f"sandbox: task page {sandbox.page_url}/ (every task, its timeline, tokens and cost)")
        print(f"sandbox: state in {directory}; demo issues labelled 'coding agent'\n", flush=True)
        named = list(zip(("github", "gitlab"), threads, strict=True))
        for platform, thread in named:
            opened = f"@{thread.author.login} opened: {thread.title}\n    {thread.body}"
            print(f"[{platform} #{thread.number}] {opened}")
        printer = ThreadPrinter(forge, named)
        with printer.watching():
            daemon.run_once()
        show_timelines(daemon.store, threads, directory, sandbox.settings.llm.price)
        for platform, thread in named:
            page = sandbox.page_of(platform, thread)
            print(f"sandbox: {platform} #{thread.number} on the task page: {page}")
        if not until_done:
            print(
                "\nsandbox: the demo tasks ended; the daemon keeps polling and the page stays up"
                " (Ctrl-C to quit)",
                flush=True,
            )
            stop = sandbox.stop
            signal.signal(signal.SIGINT, lambda *_: stop.set())
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            with printer.watching():
                daemon.run_forever()
        ok = all("coding agent done" in t.labels for t in threads)
    print(f"\nsandbox: {'all demo tasks done' if ok else 'a demo task did not finish'}")
    return 0 if ok else 1
