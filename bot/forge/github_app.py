"""Running as a GitHub App: identity, installations and their repositories, through PyGithub.

The app authenticates with a JWT signed by its private key (`Auth.AppAuth`); each installation
gets its own token, minted and refreshed by `Auth.AppInstallationAuth` shortly before it expires
(installation tokens live one hour). The bot's identity is `<app-slug>[bot]`: `GET /app` names
the slug, and `GET /user` is not available to installation tokens
(docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jwt
import requests
from github import Auth, Github, GithubException, GithubIntegration
from github.Requester import Requester

from bot.forge.errors import AuthError
from bot.forge.github import _translate
from bot.model.thread import User


@dataclass(frozen=True)
class Installation:
    id: int
    auth: Auth.AppInstallationAuth
    repos: tuple[str, ...]


class GitHubApp:
    def __init__(self, api_url: str, app_id: int, private_key: str, timeout: float = 30.0) -> None:
        try:
            self._auth = Auth.AppAuth(app_id, private_key)
            self._auth.create_jwt()  # a key that cannot sign fails here, at start
        except (ValueError, TypeError, jwt.PyJWTError) as exc:
            problem = type(exc).__name__
            raise AuthError(f"github.app: the private key cannot sign ({problem})") from None
        self._api = api_url.rstrip("/")
        self._timeout = int(timeout)
        self._integration = GithubIntegration(
            auth=self._auth, base_url=self._api, timeout=self._timeout, retry=None, lazy=True
        )
        # One token source per installation: reading it again (the daemon's refresh) reuses
        # the token it holds instead of minting another.
        self._auths: dict[int, Auth.AppInstallationAuth] = {}

    def identity(self) -> User:
        app = self._call(self._integration.get_app)
        return User(f"{app.slug}[bot]", int(app.id), True)

    def installation_ids(self) -> list[int]:
        return [int(i.id) for i in self._call(lambda: list(self._integration.get_installations()))]

    def installation(self, installation_id: int, subset: Sequence[str] = ()) -> Installation:
        """An installation's token source and its repositories (those of `subset` only, when
        given)."""
        auth = self._auths.get(installation_id)
        if auth is None:
            auth = self._auths[installation_id] = Auth.AppInstallationAuth(
                self._auth, installation_id
            )
        requester = Github(
            auth=auth, base_url=self._api, timeout=self._timeout, retry=None, lazy=True
        ).requester
        repos = self._call(lambda: _installation_repos(requester))
        if subset:
            wanted = {r.lower() for r in subset}
            repos = [r for r in repos if r.lower() in wanted]
        return Installation(installation_id, auth, tuple(repos))

    @staticmethod
    def _call(fn: Any) -> Any:
        try:
            return fn()
        except (GithubException, requests.exceptions.RequestException) as exc:
            raise _translate(exc) from None


def _installation_repos(requester: Requester) -> list[str]:
    repos: list[str] = []
    page = 1
    while True:
        _, data = requester.requestJsonAndCheck(
            "GET", "/installation/repositories", {"per_page": 100, "page": page}
        )
        chunk = [str(r["full_name"]) for r in data.get("repositories") or []]
        repos.extend(chunk)
        if not chunk or len(repos) >= int(data.get("total_count") or 0):
            return repos
        page += 1
