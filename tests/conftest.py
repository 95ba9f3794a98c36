from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bot.core.config import LabelSettings
from bot.forge.base import Forge
from bot.forge.factory import watched_labels
from bot.forge.github import GitHubForge
from bot.forge.gitlab import GitLabForge
from bot.forge.policy import RequestPolicy
from bot_sandbox.forge_server import ForgeServer

# Recognisable fake secrets: the secrets tests grep every output for them.
BOT_TOKEN = "ghp_FAKEbotTOKEN0123456789abcdefABCDEF"
ALICE_TOKEN = "ghp_FAKEaliceTOKEN0123456789abcdefABC"
LABELS = watched_labels(LabelSettings())  # exactly what the daemon watches
REPO = "acme/app"


def seed_world(srv: ForgeServer) -> ForgeServer:
    """The test world: the bot, a writer (alice), a reader (bob), REPO on both forges."""
    world = srv.world
    world.add_user("coding-bot", token=BOT_TOKEN)
    world.add_user("alice", token=ALICE_TOKEN)
    world.add_user("github-actions[bot]", is_bot=True)
    roles = {"alice": "write", "bob": "read", "coding-bot": "write", "carol": "maintain"}
    files = {"README.md": "# app\n", "src/app.py": "print('hi')\n"}
    world.add_repo("github", REPO, files=files, roles=roles)
    world.add_repo("gitlab", REPO, files=files, roles=roles)
    return srv


@pytest.fixture
def server() -> Iterator[ForgeServer]:
    with ForgeServer() as srv:
        yield seed_world(srv)


def fast_policy(host: str, **overrides: float) -> RequestPolicy:
    settings: dict[str, float] = {
        "backoff_base": 0.01,
        "backoff_cap": 0.05,
        "max_inline_wait": 10.0,
    }
    settings.update(overrides)
    return RequestPolicy(host=host, stop=threading.Event(), **settings)  # type: ignore[arg-type]


ForgeFactory = Callable[..., Forge]


@pytest.fixture(params=["github", "gitlab"])
def platform(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_forge(server: ForgeServer, platform: str) -> ForgeFactory:
    def build(
        token: str = BOT_TOKEN, policy: RequestPolicy | None = None, timeout: float = 5
    ) -> Forge:
        policy = policy or fast_policy(platform)
        if platform == "github":
            return GitHubForge(
                server.url,
                token,
                watch_labels=LABELS,
                seconds_between_writes=0,
                policy=policy,
                timeout=timeout,
            )
        return GitLabForge(server.url, token, watch_labels=LABELS, policy=policy, timeout=timeout)

    return build


def kind_for(platform: str, change_request: bool) -> str:
    if not change_request:
        return "issue"
    return "pull" if platform == "github" else "mr"


@pytest.fixture
def model() -> Iterator[Any]:
    from bot_sandbox.llm_server import LLMServer

    with LLMServer() as srv:
        yield srv


@pytest.fixture
def rig(server: ForgeServer, model: Any, platform: str, tmp_path: Any) -> Any:
    from tests.rig import Rig

    return Rig(server, model, platform, tmp_path / "state")


SECRETS = (BOT_TOKEN, ALICE_TOKEN)


@pytest.fixture(autouse=True)
def no_secret_leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every test: no known fake token in any file the test wrote, or any comment."""
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    srv = request.getfixturevalue("server") if "server" in request.fixturenames else None
    yield
    if root is not None:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 8 * 1024 * 1024:
                data = path.read_bytes()
                if path.suffix in (".yaml", ".yml") or "token" in path.name:
                    continue  # the test's own inputs: configs and token files
                for secret in SECRETS:
                    assert secret.encode() not in data, f"token leaked into {path}"
    if srv is not None:
        world = srv.world
        for thread in world.all_threads():
            texts = [thread.body, *(c.body for c in thread.comments)]
            if thread.change is not None:
                texts.append(thread.change.body)
            for secret in SECRETS:
                assert all(secret not in text for text in texts), "token leaked into the thread"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """One PostgreSQL cluster for the session (Unix socket only); missing binaries fail."""
    from tests.pg import Cluster, ClusterUnavailable

    try:
        cluster = Cluster()
    except ClusterUnavailable as exc:
        pytest.fail(f"no PostgreSQL test cluster: {exc}", pytrace=False)
    try:
        cluster.start()
    except ClusterUnavailable as exc:
        cluster.stop()
        pytest.fail(f"the PostgreSQL test cluster did not start: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_dsn(pg_cluster: Any) -> str:
    """A fresh, empty database of the session's cluster (not migrated)."""
    return str(pg_cluster.create_database())


# Stand-in servers for the network tests (tests/jail/standins.py): one "outside" (the
# machine's own non-loopback address, or a network namespace made for it), one on 127.0.0.1.


@pytest.fixture(scope="module")
def outside() -> Iterator[Any]:
    from tests.jail import standins

    with standins.outside() as where:
        if where is None:
            pytest.skip("no non-loopback address here, and no network namespace can be made")
        address, prefix = where
        with standins.serve(address, prefix) as server:
            yield server


@pytest.fixture
def loopback() -> Iterator[Any]:
    from tests.jail import standins

    with standins.serve("127.0.0.1") as server:
        yield server
