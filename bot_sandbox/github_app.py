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
The signature is verified with PyJWT and the app's public key, as GitHub does. The routes that
serve it are in `bot_sandbox/github/installations.py`.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot_sandbox.http import Request
from bot_sandbox.world import SUser, World

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
        return self.installation_of(request) is not None

    def may_see(self, request: Request, repo: str) -> bool:
        installation = self.installation_of(request)
        return installation is None or repo in installation.repos

    def installation_of(self, request: Request) -> SInstallation | None:
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
