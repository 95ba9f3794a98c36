"""A GitHub App served by the emulator: JWT authentication, installations, installation tokens.

As docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app describes:
- the app signs a JWT with its private key (RS256; `iss` the app id, `iat`/`exp` at most ten
  minutes apart) and sends it as `Authorization: Bearer`; only the `/app...` endpoints accept it;
- `GET /app` names the app (its `slug`: the bot user is `<slug>[bot]`),
  `GET /app/installations` lists where it is installed;
- `POST /app/installations/{id}/access_tokens` returns `{token, expires_at}`: an installation
  token, valid one hour (here `lifetime` seconds) and refused once expired (401);
- `GET /installation/repositories` (installation token) lists the installation's repositories
  as `{total_count, repositories}`.
The signature is verified with PyJWT and the app's public key, as GitHub does.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot_sandbox.forge_server import HttpError, Request, Response, Route
from bot_sandbox.github_api import repo_json, user_json
from bot_sandbox.world import SUser, World

if TYPE_CHECKING:
    from bot_sandbox.forge_server import ForgeServer

MAX_JWT_SECONDS = 600


@dataclass
class SInstallation:
    id: int
    account: str
    repos: list[str]


@dataclass
class _Token:
    installation: int
    expires: float  # wall clock


@dataclass
class AppEmulator:
    world: World
    slug: str
    lifetime: float = 3600.0
    app_id: int = 0
    installations: dict[int, SInstallation] = field(default_factory=dict)
    tokens_minted: int = 0

    def __post_init__(self) -> None:
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._public = self._key.public_key()
        self.app_id = self.app_id or self.world.next_id()
        self.bot = self.world.add_user(f"{self.slug}[bot]", is_bot=True)
        self._principal = SUser(f"app:{self.slug}", self.app_id, None, True)
        self._tokens: dict[str, _Token] = {}
        self._lock = threading.Lock()

    @property
    def private_key_pem(self) -> str:
        return self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ).decode()

    def install(self, account: str, repos: list[str]) -> int:
        installation = SInstallation(self.world.next_id(), account, list(repos))
        self.installations[installation.id] = installation
        for repo in repos:  # the app's bot can write where it is installed
            self.world.repo("github", repo).roles[self.bot.login] = "write"
        return installation.id

    def add_repo(self, installation_id: int, repo: str) -> None:
        """The owner adds a repository to an existing installation."""
        self.installations[installation_id].repos.append(repo)
        self.world.repo("github", repo).roles[self.bot.login] = "write"

    def remove_repo(self, installation_id: int, repo: str) -> None:
        """The owner removes a repository from the installation: its tokens no longer see it."""
        self.installations[installation_id].repos.remove(repo)

    def uninstall(self, installation_id: int) -> None:
        """The owner uninstalls the app: the installation and its tokens are gone."""
        del self.installations[installation_id]
        with self._lock:  # its tokens are revoked with it
            self._tokens = {
                token: held
                for token, held in self._tokens.items()
                if held.installation != installation_id
            }

    def issued_tokens(self) -> list[str]:
        with self._lock:
            return list(self._tokens)

    def expire_tokens(self) -> None:
        """Every issued token expires now (as an hour passing would do)."""
        with self._lock:
            for token in self._tokens.values():
                token.expires = 0.0

    # -- authentication (called by the request handler) --------------------------------------

    def user_for(self, token: str, path: str) -> SUser | None:
        if token.count(".") == 2:
            return self._principal if path.startswith("/app") and self._jwt_ok(token) else None
        with self._lock:
            found = self._tokens.get(token)
        if found is None or found.expires <= time.time() or path.startswith("/app"):
            return None
        return self.bot

    def is_installation(self, request: Request) -> bool:
        return self._installation_of(request) is not None

    def may_see(self, request: Request, repo: str) -> bool:
        installation = self._installation_of(request)
        return installation is None or repo in installation.repos

    def _installation_of(self, request: Request) -> SInstallation | None:
        value = request.headers.get("Authorization") or ""
        token = value.partition(" ")[2].strip()
        with self._lock:
            found = self._tokens.get(token)
        return self.installations.get(found.installation) if found else None

    def _jwt_ok(self, token: str) -> bool:
        try:
            claims = jwt.decode(
                token,
                self._public,
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"], "verify_iss": False},
                leeway=60,
            )
        except jwt.PyJWTError:
            return False
        too_long = int(claims["exp"]) - int(claims["iat"]) > MAX_JWT_SECONDS + 60
        return str(claims["iss"]) == str(self.app_id) and not too_long

    def mint(self, installation_id: int) -> tuple[str, float]:
        token = "ghs_" + secrets.token_hex(18)
        expires = time.time() + self.lifetime
        with self._lock:
            self._tokens[token] = _Token(installation_id, expires)
            self.tokens_minted += 1
        return token, expires


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def routes(server: ForgeServer) -> list[Route]:
    def app() -> AppEmulator:
        if server.github_app is None:
            raise HttpError(404, "Not Found")
        return server.github_app

    def owner(req: Request) -> dict[str, Any]:
        return user_json(req.base_url, server.world.user("app-owner"))

    def installation_json(req: Request, inst: SInstallation) -> dict[str, Any]:
        base = req.base_url
        return {
            "id": inst.id,
            "account": user_json(base, server.world.user(inst.account)),
            "app_id": app().app_id,
            "app_slug": app().slug,
            "target_id": server.world.user(inst.account).id,
            "target_type": "Organization",
            "repository_selection": "selected",
            "access_tokens_url": f"{base}/app/installations/{inst.id}/access_tokens",
            "repositories_url": f"{base}/installation/repositories",
            "html_url": f"{base}/settings/installations/{inst.id}",
            "permissions": {"issues": "write", "pull_requests": "write", "contents": "write"},
            "events": ["issues", "issue_comment", "pull_request"],
            "created_at": _iso(0),
            "updated_at": _iso(0),
            "single_file_name": None,
        }

    def get_app(req: Request, m: re.Match[str]) -> Response:
        emulated = app()
        return Response(
            body={
                "id": emulated.app_id,
                "slug": emulated.slug,
                "node_id": f"A_{emulated.app_id}",
                "owner": owner(req),
                "name": emulated.slug,
                "description": "",
                "external_url": req.base_url,
                "html_url": f"{req.base_url}/apps/{emulated.slug}",
                "created_at": _iso(0),
                "updated_at": _iso(0),
                "permissions": {"issues": "write", "pull_requests": "write"},
                "events": ["issues", "issue_comment"],
            }
        )

    def list_installations(req: Request, m: re.Match[str]) -> Response:
        body = [installation_json(req, i) for i in app().installations.values()]
        return Response(body=body, paginate=True)

    def access_token(req: Request, m: re.Match[str]) -> Response:
        inst = app().installations.get(int(m["id"]))
        if inst is None:
            raise HttpError(404, "Not Found")
        token, expires = app().mint(inst.id)
        return Response(
            201,
            {
                "token": token,
                "expires_at": _iso(expires),
                "permissions": {"issues": "write", "pull_requests": "write"},
                "repository_selection": "selected",
            },
        )

    def installation_repos(req: Request, m: re.Match[str]) -> Response:
        inst = app()._installation_of(req)
        if inst is None:
            raise HttpError(403, "This endpoint requires an installation token")
        repos = [repo_json(req.base_url, server.world.repo("github", r)) for r in inst.repos]
        page = int(req.query.get("page", "1"))
        per_page = min(100, int(req.query.get("per_page", "30")))
        chunk = repos[(page - 1) * per_page : page * per_page]
        return Response(body={"total_count": len(repos), "repositories": chunk})

    table: list[tuple[str, str, Any]] = [
        ("GET", r"/app", get_app),
        ("GET", r"/app/installations", list_installations),
        ("POST", r"/app/installations/(?P<id>\d+)/access_tokens", access_token),
        ("GET", r"/installation/repositories", installation_repos),
    ]
    return [Route(method, re.compile(pattern), handler) for method, pattern, handler in table]
