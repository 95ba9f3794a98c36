"""The `mcp:` section of the configuration: which MCP servers exist, how each is started, and
which repository is offered which of their tools (README, "MCP tools")."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")  # no "__": it separates names
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REPO = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+$")
DEFAULT_SET = "*"  # the `mcp.repositories` entry for repositories not listed


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class McpServerSettings(_Frozen):
    """One server: `command` (stdio, a child process) or `url` (streamable HTTP)."""

    command: tuple[str, ...] | None = Field(default=None, min_length=1)
    # The server's whole environment (stdio): nothing of the daemon's is inherited. Values
    # are secrets (masked, kept out of logs); `NAME_file:` reads one from a file.
    env: dict[str, SecretStr] = Field(default_factory=dict)
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, SecretStr] = Field(default_factory=dict)  # secrets, like `env`
    # Run inside the jail (jail.enabled): no network, only system directories, its own /tmp.
    jail: bool = False
    # The task's working copy, read-only, as its working directory (/work in the jail).
    working_copy: bool = False
    # Whether its results may instruct the model; default: only a jailed stdio server (it
    # cannot reach the network) is trusted, others' results are quoted as untrusted data.
    trusted: bool | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (HTTP)")
        if self.url is not None and (self.env or self.jail or self.working_copy):
            raise ValueError("env, jail and working_copy are for command servers (stdio)")
        if self.command is not None and self.headers:
            raise ValueError("headers are for url servers (HTTP)")
        if self.working_copy and not self.jail:
            raise ValueError("working_copy needs jail: true (only the jail has a working copy)")
        return self

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name in value:
            if not ENV_NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value

    @property
    def is_trusted(self) -> bool:
        if self.trusted is not None:
            return self.trusted
        return self.jail and self.command is not None


class McpSettings(_Frozen):
    servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    # Per repository ("owner/name", or "*" for every other one): the servers offered, each
    # whole ("NAME") or one tool of it ("NAME:tool"). A repository without an entry, and no
    # "*", is offered none.
    repositories: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    # One call's limit, and a server's start (handshake and tool list).
    timeout_seconds: float = Field(default=60.0, gt=0, le=3600)

    @field_validator("servers")
    @classmethod
    def _names(cls, value: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name in value:
            if not SERVER_NAME.match(name) or len(name) > 24:
                raise ValueError(
                    f"{name!r}: a server name is letters, digits, '-' and single '_' (at most 24)"
                )
        return value

    @model_validator(mode="after")
    def _known_servers(self) -> McpSettings:
        for repo, offered in self.repositories.items():
            if repo != DEFAULT_SET and not _REPO.match(repo):
                raise ValueError(f"repositories: {repo!r} is not owner/name (or '*')")
            for item in offered:
                server = item.split(":", 1)[0]
                if server not in self.servers:
                    raise ValueError(f"repositories.{repo}: {item!r} names no configured server")
        return self

    def offered(self, repo: str) -> dict[str, frozenset[str] | None]:
        """The servers `repo` is offered, each with its tools (None: all of them)."""
        entries = {k.lower(): v for k, v in self.repositories.items()}
        items = entries.get(repo.lower(), entries.get(DEFAULT_SET, ()))
        out: dict[str, frozenset[str] | None] = {}
        for item in items:
            server, _, tool = item.partition(":")
            if not tool:
                out[server] = None
            elif server not in out or out[server] is not None:
                out[server] = (out.get(server) or frozenset()) | {tool}
        return out

    def secrets(self) -> list[str]:
        """Values to keep out of logs: every header, and env values long enough to be one."""
        out = []
        for server in self.servers.values():
            out += [v.get_secret_value() for v in server.headers.values()]
            out += [
                v.get_secret_value() for v in server.env.values() if len(v.get_secret_value()) >= 8
            ]
        return [v for v in out if v]
