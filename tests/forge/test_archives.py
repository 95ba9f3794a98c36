"""Repository snapshots are fetched where the forge sends them, without our token going along.

github.com redirects the tarball endpoint to codeload.github.com (another host), GitHub
Enterprise Server to `/_codeload/` on its own host; both links carry their own token. GitLab.com
serves archives itself but allows only a few a minute per user. The emulator does all three.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from bot.forge.errors import RateLimited, TransientError
from bot.forge.github import GitHubForge
from bot.forge.gitlab import GitLabForge
from bot.forge.pacing import WindowPacer
from bot.repo.snapshot import snapshot
from bot_sandbox.forge_server import ForgeServer
from tests.conftest import BOT_TOKEN, LABELS, REPO, fast_policy

FILES = {"README.md": "# app\n", "src/app.py": "print('hi')\n"}


def _world(server: ForgeServer) -> ForgeServer:
    server.world.add_user("coding-bot", token=BOT_TOKEN)
    server.world.add_repo("github", REPO, files=FILES, roles={"coding-bot": "write"})
    server.world.add_repo("gitlab", REPO, files=FILES, roles={"coding-bot": "write"})
    return server


def _github(server: ForgeServer) -> GitHubForge:
    return GitHubForge(
        server.url, BOT_TOKEN, watch_labels=LABELS, seconds_between_writes=0, timeout=5,
        policy=fast_policy("github"),
    )  # fmt: skip


def _head(server: ForgeServer, platform: str) -> str:
    repo = server.world.repo(platform, REPO)
    return repo.branches[repo.default_branch]


@pytest.mark.parametrize("archive_host", ["codeload", "same"])
def test_github_snapshot_follows_the_redirect_without_the_token(
    archive_host: str, tmp_path: Path
) -> None:
    with ForgeServer(archive_host=archive_host) as server:
        _world(server)
        sha = _head(server, "github")
        root = snapshot(_github(server), REPO, sha, tmp_path / "cache")

        assert (root / "src/app.py").read_text() == "print('hi')\n"
        archive_hops = [r for r in server.requests if "legacy.tar.gz" in r.path]
        assert [(r.status, r.authorized) for r in archive_hops] == [(200, False)]
        hop = archive_hops[0]
        if archive_host == "codeload":  # github.com: the archive comes from another host
            assert hop.platform == "codeload"
            assert hop.path == f"/{REPO}/legacy.tar.gz/{sha}"
            assert server.codeload_url.split(":")[1] != server.url.split(":")[1]
        else:  # GHES: /_codeload/ on the API's own host
            assert hop.platform == "github"
            assert hop.path == f"/_codeload/{REPO}/legacy.tar.gz/{sha}"
        api = [r for r in server.requests if r.path.endswith(f"/tarball/{sha}")]
        assert [(r.status, r.authorized) for r in api] == [(302, True)]


def test_emulator_serves_archives_only_where_github_does(tmp_path: Path) -> None:
    """The fidelity the test above relies on: no token, no archive; no codeload on the API."""
    import requests

    with ForgeServer() as server:
        _world(server)
        sha = _head(server, "github")
        bare = requests.get(f"{server.codeload_url}/{REPO}/legacy.tar.gz/{sha}", timeout=5)
        on_api = requests.get(
            f"{server.url}/_codeload/{REPO}/legacy.tar.gz/{sha}",
            headers={"Authorization": f"token {BOT_TOKEN}"},
            timeout=5,
        )
        # What PyGithub's getFile made of the codeload link: its path, on the API host.
        path_only = requests.get(
            f"{server.url}/{REPO}/legacy.tar.gz/{sha}",
            headers={"Authorization": f"token {BOT_TOKEN}"},
            timeout=5,
        )
    assert (bare.status_code, on_api.status_code, path_only.status_code) == (404, 404, 404)


def test_a_refused_archive_is_classified_like_any_github_error(tmp_path: Path) -> None:
    with ForgeServer() as server:
        _world(server)
        server.rate_limit_for("github", 30, kind="secondary")
        forge = _github(server)
        with pytest.raises(RateLimited):
            forge.download_archive(REPO, _head(server, "github"), tmp_path / "a.tar.gz")
        assert server.count(platform="codeload") == 0


def _gitlab(server: ForgeServer, per_window: int, window: float) -> GitLabForge:
    return GitLabForge(
        server.url, BOT_TOKEN, watch_labels=LABELS, timeout=5, policy=fast_policy("gitlab"),
        archives_per_minute=per_window, archive_window=window,
    )  # fmt: skip


def test_gitlab_archive_downloads_are_paced_to_the_forge_limit(tmp_path: Path) -> None:
    # The emulator keeps GitLab.com's rule (N per window per user) with a short window here.
    with ForgeServer(gitlab_archives_per_minute=2, gitlab_archive_window=0.5) as server:
        _world(server)
        sha = _head(server, "gitlab")
        forge = _gitlab(server, per_window=2, window=0.5)
        for n in range(5):
            dest = tmp_path / f"{n}.tar.gz"
            forge.download_archive(REPO, sha, dest)
            with tarfile.open(dest) as tar:
                assert any(m.name.endswith("src/app.py") for m in tar)
        archive = r"/repository/archive"
        assert server.count(platform="gitlab", path=archive, status=200) == 5
        assert server.count(platform="gitlab", path=archive, status=429) == 0


def test_gitlab_archive_limit_is_real_in_the_emulator(tmp_path: Path) -> None:
    """Without pacing the third download in the window is refused, as on GitLab.com."""
    with ForgeServer(gitlab_archives_per_minute=2, gitlab_archive_window=60) as server:
        _world(server)
        forge = _gitlab(server, per_window=0, window=60)
        sha = _head(server, "gitlab")
        forge.download_archive(REPO, sha, tmp_path / "1.tar.gz")
        forge.download_archive(REPO, sha, tmp_path / "2.tar.gz")
        with pytest.raises(RateLimited):
            forge.download_archive(REPO, sha, tmp_path / "3.tar.gz")


class _FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return False


def test_pacer_waits_exactly_until_the_oldest_slot_leaves_the_window() -> None:
    fake = _FakeTime()
    pacer = WindowPacer(3, 60.0, clock=fake.clock, wait=fake.wait)
    assert [pacer.acquire() for _ in range(3)] == [0.0, 0.0, 0.0]
    fake.now = 10.0
    assert pacer.acquire() == 50.0  # the first slot frees at t=60
    assert fake.waits == [50.0]
    assert WindowPacer(0, 60.0, clock=fake.clock, wait=fake.wait).acquire() == 0.0


def test_pacer_wait_is_cut_short_by_shutdown() -> None:
    fake = _FakeTime()
    pacer = WindowPacer(1, 60.0, clock=fake.clock, wait=lambda _s: True)
    pacer.acquire()
    with pytest.raises(TransientError, match="shutting down"):
        pacer.acquire()


def test_pacer_slot_counts_from_the_end_of_the_request() -> None:
    """The forge counts a request on arrival; our window must not run ahead of it."""
    fake = _FakeTime()
    pacer = WindowPacer(1, 60.0, clock=fake.clock, wait=fake.wait)
    with pacer.slot():
        fake.now = 5.0  # a slow download: 5 s in flight
    assert pacer.acquire() == 65.0 - 5.0
