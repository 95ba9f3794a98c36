"""YAML configuration -> frozen, validated settings.

This is the only module that reads environment variables: `${NAME}` interpolation in string
values, and `$CREDENTIALS_DIRECTORY` (systemd `LoadCredential=`) for relative `*_file` paths.
Every problem is raised as `ConfigError` whose message names the key path, so that the CLI can
print one line and exit 2 instead of a traceback.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.core.mcp_settings import McpSettings
from bot.core.pricing import Price

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_REPO_PATH = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+$")
# Keys whose value is a secret; `<key>_file` is accepted in their place.
SECRET_KEYS = (
    "token",
    "api_key",
    "private_key",
    "github_secret",
    "gitlab_secret",
    "dsn",
    "password",
)
# Mappings in which any `<NAME>_file` key reads the secret `<NAME>` from a file (MCP servers'
# environment and headers).
_SECRET_MAPS = re.compile(r"^mcp\.servers\.[^.]+\.(env|headers)$")


class ConfigError(Exception):
    """An invalid configuration; `str()` is a one-line message naming the key path."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}" if path else problem)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GitHubAppSettings(_Frozen):
    """Run as a GitHub App: its id and private key (PEM; `private_key_file` reads a file or a
    systemd credential). Installations: all of the app's, or only those listed. The daemon
    reads them and their repositories again every `refresh_minutes` (0: only at start)."""

    id: int = Field(ge=1)
    private_key: SecretStr
    installations: tuple[int, ...] = ()
    refresh_minutes: float = Field(default=10.0, ge=0)


class GitHubSettings(_Frozen):
    api_url: str = "https://api.github.com"
    app: GitHubAppSettings | None = None  # before `token`: its validator looks at it
    token: SecretStr | None = Field(default=None, validate_default=True)
    # With a token: the repositories to watch. As an app: a subset of the installations'
    # repositories (empty: all of them).
    repositories: tuple[str, ...] = Field(default=(), validate_default=True)
    # PyGithub throttles writes by default; GitHub asks for about one second between them.
    seconds_between_writes: float = Field(default=1.0, ge=0)
    timeout_seconds: float = Field(default=30.0, gt=0)

    @field_validator("repositories")
    @classmethod
    def _owner_name(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for repo in value:
            if not _REPO_PATH.match(repo) or repo.count("/") != 1:
                raise ValueError(f"{repo!r} is not of the form owner/name")
        return value

    @field_validator("token")
    @classmethod
    def _one_credential(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        has_app = info.data.get("app") is not None
        if value is None and not has_app:
            raise ValueError("required key is missing (or configure github.app)")
        if value is not None and has_app:
            raise ValueError("give either a token or github.app, not both")
        return value

    @field_validator("repositories")
    @classmethod
    def _some_repository(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if not value and info.data.get("token") is not None:
            raise ValueError("should have at least 1 item after validation, not 0")
        return value


class GitLabSettings(_Frozen):
    url: str = "https://gitlab.com"
    token: SecretStr
    projects: tuple[str, ...] = Field(min_length=1)
    timeout_seconds: float = Field(default=30.0, gt=0)
    # GitLab.com allows 5 archive downloads a minute per user; 0 means no pacing (self-managed).
    archive_downloads_per_minute: int = Field(default=5, ge=0)

    @field_validator("projects")
    @classmethod
    def _group_name(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for project in value:
            if not _REPO_PATH.match(project):
                raise ValueError(f"{project!r} is not of the form group/name")
        return value


class LabelSettings(_Frozen):
    trigger: str = Field(default="coding agent", min_length=1)
    processing: str = Field(default="coding agent processing", min_length=1)
    done: str = Field(default="coding agent done", min_length=1)
    paused: str = Field(default="coding agent paused", min_length=1)
    stopped: str = Field(default="coding agent stopped", min_length=1)
    failed: str = Field(default="coding agent failed", min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> LabelSettings:
        names = list(self.model_dump().values())
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"label names must differ; repeated: {', '.join(duplicates)}")
        return self


class LLMSettings(_Frozen):
    base_url: str = "http://127.0.0.1:11434/v1"
    api_key: SecretStr | None = None
    model: str = "llama3.1"
    context_window: int = Field(default=8192, ge=512)
    tokenizer: Literal["cl100k_base", "o200k_base"] | None = None
    max_steps: int = Field(default=40, ge=1)
    max_tokens_per_task: int = Field(default=400_000, ge=1000)
    # Reaching a cap pauses the task and asks (README, "Caps"); the cost cap needs `price`.
    max_cost_per_task: Decimal | None = Field(default=None, gt=0)
    timeout_seconds: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)
    # "native" uses the API's tool calling; "prompt" describes tools in the system message and
    # parses a fenced JSON block, for servers without tool calling.
    tool_calling: Literal["native", "prompt"] = "native"
    # Room left in the window for the answer; the prompt gets context_window minus this.
    reserve_output_tokens: int = Field(default=1024, ge=64)
    # What tokens cost (optional): cost per model call, run and task in `bot show`, `bot
    # status`, the final comment's report and the metrics. Absent: tokens only.
    price: Price | None = None

    @model_validator(mode="after")
    def _room_for_prompt(self) -> LLMSettings:
        if self.reserve_output_tokens >= self.context_window // 2:
            raise ValueError("reserve_output_tokens must be less than half of context_window")
        return self


# CI definitions: GitHub Actions workflows and local actions, GitLab CI and its usual includes.
PROTECTED_PATHS = (".github/workflows/**", ".github/actions/**", ".gitlab-ci.yml", ".gitlab/ci/**")


class AgentSettings(_Frozen):
    # On a pull/merge request task, commit to that request's own branch (same repository
    # only); otherwise changes go to a new branch and a new draft request.
    push_to_existing_branches: bool = False
    # Open pull/merge requests as drafts. GitHub refuses drafts in private repositories on
    # the Free and Pro plans (422); set false there to open ordinary pull requests.
    draft_change_requests: bool = True
    # A task whose runs keep ending on transient forge errors waits this long after the
    # second failure, doubling each time (with jitter, up to an hour).
    retry_backoff_seconds: float = Field(default=30.0, ge=0)
    tool_result_tokens: int = Field(default=2000, ge=200)  # cap on one tool result
    branch_prefix: str = Field(default="bot/", pattern=r"^[A-Za-z0-9._/-]*$")
    snapshot_max_files: int = Field(default=50_000, ge=100)
    snapshot_max_bytes: int = Field(default=512 * 1024 * 1024, ge=1024 * 1024)
    # Paths the agent may not create, change or delete (`**` spans folders): CI definitions
    # run with the repository's secrets. Per repository, `allow_protected_paths` lifts them.
    protected_paths: tuple[str, ...] = PROTECTED_PATHS
    allow_protected_paths: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    # The final comment ends with a collapsed "What I did" section (steps, tools, files,
    # commands and checks, comments heard, duration, tokens, cost).
    report: bool = True

    @field_validator("protected_paths")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not pattern.strip("/ ") for pattern in value):
            raise ValueError("a protected path pattern is empty")
        return value

    @field_validator("allow_protected_paths")
    @classmethod
    def _allowances(cls, value: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        for repo in value:
            if not _REPO_PATH.match(repo):
                raise ValueError(f"{repo!r} is not of the form owner/name or group/name")
        return value


class AccessSettings(_Frozen):
    # Empty means: anyone with write access to the repository may instruct the bot.
    allowed_users: tuple[str, ...] = ()
    # Other bots whose comments are never fed to the model (the bot's own login comes from
    # its token and is always ignored).
    ignore_authors: tuple[str, ...] = ("github-actions[bot]", "dependabot[bot]")
    # What to do with comments from people without write access: quote them as untrusted
    # data, or leave them out entirely.
    untrusted_comments: Literal["quote", "ignore"] = "quote"


class MetricsSettings(_Frozen):
    listen: str = Field(
        pattern=r"^[\w.\-\[\]:]*:\d{1,5}$", description="host:port, e.g. 127.0.0.1:9464"
    )


class HealthSettings(_Frozen):
    # `bot healthcheck` fails when the heartbeat is older than this many poll intervals, or
    # polls have been failing for that long.
    max_missed_polls: int = Field(default=3, ge=1)


class RepoChecks(_Frozen):
    """Commands for one repository: `setup` once per task run, `checks` before publishing."""

    setup: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    # Setup steps (dependency installs) may need the network; checks never get it.
    setup_network: bool = False


class JailSettings(_Frozen):
    # Off: the agent cannot run commands and pull/merge requests say checks were not run.
    enabled: bool = False
    bwrap: str = Field(default="bwrap", min_length=1)
    # User-mode networking for setup steps that may use the network (never the host's own).
    slirp4netns: str = Field(default="slirp4netns", min_length=1)
    timeout_seconds: float = Field(default=300.0, gt=0)
    cpu_seconds: int = Field(default=300, ge=1)
    memory_mb: int = Field(default=4096, ge=64)
    max_processes: int = Field(default=256, ge=8)
    max_file_mb: int = Field(default=512, ge=1)
    max_output_mb: int = Field(default=16, ge=1)
    tmp_mb: int = Field(default=512, ge=1)
    # The working copy and everything commands write into it, together: a size-limited tmpfs
    # per copy (memory), so a command that fills it gets ENOSPC and the host's disk is left
    # alone (README, "Running commands").
    disk_mb: int = Field(default=2048, ge=16)
    # All of one task's commands together (memory.max of its cgroup), where the daemon's
    # cgroup is delegated (systemd Delegate=); tmpfs pages they write count too.
    task_memory_mb: int = Field(default=6144, ge=64)
    # The whole environment of a command besides PATH, HOME, LANG, TERM, CI: nothing is
    # inherited from the daemon.
    env: dict[str, str] = Field(default_factory=dict)
    # Extra read-only directories (toolchains outside /usr, e.g. /opt/node).
    read_only_paths: tuple[Path, ...] = ()
    # Where working copies are made (default: the system temp dir); never inside state_dir.
    work_dir: Path | None = None
    # As root, each command runs as its own uid from this block (rlimits bind per uid).
    uid_base: int = Field(default=1_000_000_000, ge=1000, le=4_000_000_000)
    # Whether `.coding-agent.yml` may ask for the network during setup (`setup_network`); the
    # daemon's own `repositories` entries may always.
    allow_repo_setup_network: bool = False
    # Extra model turns to fix failing checks before the request is opened anyway.
    max_fix_turns: int = Field(default=3, ge=0, le=20)
    # Per repository ("owner/name"); `.coding-agent.yml` in the repository adds to these when
    # it comes from the default branch or a writer's branch.
    repositories: dict[str, RepoChecks] = Field(default_factory=dict)


class CacheSettings(_Frozen):
    # Repository snapshots (`state_dir/cache/snapshots`) are evicted least-recently-used down
    # to this size; a snapshot in use by a running task is never evicted.
    max_snapshot_bytes: int = Field(default=2 * 1024 * 1024 * 1024, ge=0)


# The shortest task lease. Renewals come every third of the lease from a thread of their own
# (not from the polls), so a lease survives two renewals that fail or come late: a stall of two
# thirds of it. At 3 s that is 2 s, enough for a loaded machine's pauses and for psycopg_pool's
# first reconnection attempt after a database restart (1 s after the failure); below it tasks
# would change hands on ordinary hiccups, each handover redoing the step in progress.
MIN_LEASE_SECONDS = 3.0


class StoreSettings(_Frozen):
    """Where task state lives. `files` (default): `state_dir`, one daemon. `postgres`: one
    database shared by any number of daemons (`dsn`, or `dsn_file`, or `${ENV}`: a secret)."""

    backend: Literal["files", "postgres"] = "files"
    dsn: SecretStr | None = None
    # This daemon's name in leases and `bot status` (default: host name and process id).
    name: str | None = Field(default=None, min_length=1, max_length=200)
    # A task's lease: renewed every third of this while the work goes on; a daemon that dies
    # or freezes loses its tasks to the others this long after its last renewal.
    lease_seconds: float = Field(default=60.0, le=3600.0)
    # Database connections per daemon; default: one per concurrent task, plus three (polls,
    # the queue, lease renewals).
    pool_size: int | None = Field(default=None, ge=2, le=256)
    # How long a starting daemon waits for the database before it exits 1 (to be restarted).
    connect_seconds: float = Field(default=15.0, gt=0, le=600)

    @field_validator("lease_seconds")
    @classmethod
    def _lease_outlasts_a_stall(cls, value: float) -> float:
        if value < MIN_LEASE_SECONDS:
            raise ValueError(
                f"must be at least {MIN_LEASE_SECONDS:g} seconds: the lease is renewed every"
                " third of it, and a shorter one is lost to any pause of a second or two (a"
                " busy machine, a database restart), handing the task to another daemon"
            )
        return value

    @model_validator(mode="after")
    def _dsn_for_postgres(self) -> StoreSettings:
        if self.backend == "postgres" and self.dsn is None:
            raise ValueError("store.backend postgres needs store.dsn (or store.dsn_file)")
        if self.backend == "files" and self.dsn is not None:
            raise ValueError("store.dsn is only for store.backend postgres")
        return self


class WebhookSettings(_Frozen):
    """Deliveries from the forges, each triggering a check of one thread (polling stays on)."""

    listen: str = Field(
        default="127.0.0.1:8088",
        pattern=r"^[\w.\-\[\]:]*:\d{1,5}$",
        description="host:port; put a TLS proxy in front for the internet",
    )
    # GitHub: the webhook's secret (X-Hub-Signature-256); GitLab: its secret token.
    github_secret: SecretStr | None = None
    gitlab_secret: SecretStr | None = None
    max_body_kb: int = Field(default=1024, ge=16, le=25 * 1024)

    @model_validator(mode="after")
    def _some_secret(self) -> WebhookSettings:
        if self.github_secret is None and self.gitlab_secret is None:
            raise ValueError("webhooks needs github_secret or gitlab_secret (unsigned is refused)")
        return self


def is_loopback(listen: str) -> bool:
    """Whether a `host:port` accepts connections from this machine only: `localhost` or a
    loopback address (127.0.0.0/8, ::1). An empty host means every interface; any other name
    may resolve anywhere."""
    host = listen.rpartition(":")[0].strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class UISettings(_Frozen):
    """The read-only task page (README, "The task page"), served by the same HTTP server as
    the webhooks; one listener serves both when `listen` equals `webhooks.listen`."""

    listen: str = Field(
        default="127.0.0.1:8089",
        pattern=r"^[\w.\-\[\]:]*:\d{1,5}$",
        description="host:port; a non-loopback address needs password_file",
    )
    # HTTP basic authentication: any user name, this password (`password_file`: a secret,
    # read like the tokens). Required off loopback.
    password: SecretStr | None = None
    # Where people reach the page (a proxy in front, say): the final comment links to the
    # task's page under it.
    public_url: str | None = Field(default=None, pattern=r"^https?://[^\s<>\"']+$")

    @field_validator("password")
    @classmethod
    def _not_empty(cls, value: SecretStr | None) -> SecretStr | None:
        # An empty password is no password: basic auth with "" lets anyone in.
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("is empty: give the page a password, or leave the key out")
        return value

    @model_validator(mode="after")
    def _password_off_loopback(self) -> UISettings:
        if self.password is None and not is_loopback(self.listen):
            raise ValueError(
                f"listen {self.listen} is not a loopback address: set ui.password_file (HTTP"
                " basic authentication) or listen on 127.0.0.1"
            )
        return self


class Settings(_Frozen):
    state_dir: Path = Path("./state")
    poll_interval_seconds: int = Field(default=60, ge=5)
    max_concurrent_tasks: int = Field(default=2, ge=1, le=64)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    github: GitHubSettings | None = None
    gitlab: GitLabSettings | None = None
    labels: LabelSettings = LabelSettings()
    llm: LLMSettings = LLMSettings()
    access: AccessSettings = AccessSettings()
    agent: AgentSettings = AgentSettings()
    metrics: MetricsSettings | None = None
    health: HealthSettings = HealthSettings()
    jail: JailSettings = JailSettings()
    webhooks: WebhookSettings | None = None
    ui: UISettings | None = None
    cache: CacheSettings = CacheSettings()
    store: StoreSettings = StoreSettings()
    mcp: McpSettings = McpSettings()

    @model_validator(mode="after")
    def _some_source(self) -> Settings:
        if self.github is None and self.gitlab is None:
            raise ValueError("configure at least one of 'github' or 'gitlab'")
        return self

    @model_validator(mode="after")
    def _no_secret_in_the_jail(self) -> Settings:
        secrets = set(self.secrets())
        for name, value in self.jail.env.items():
            if value in secrets:
                raise ValueError(f"jail.env.{name}: holds a forge or model credential")
        return self

    @model_validator(mode="after")
    def _cost_cap_has_a_price(self) -> Settings:
        if self.llm.max_cost_per_task is not None and self.llm.price is None:
            raise ValueError(
                "llm.max_cost_per_task: a cost cap needs llm.price "
                "(input_per_million, output_per_million)"
            )
        return self

    @model_validator(mode="after")
    def _allowances_name_watched_repos(self) -> Settings:
        watched = {r.lower() for r in self.github.repositories} if self.github else set()
        watched |= {p.lower() for p in self.gitlab.projects} if self.gitlab else set()
        for repo in self.agent.allow_protected_paths:
            if repo.lower() not in watched:
                raise ValueError(
                    f"agent.allow_protected_paths: {repo!r} is not a configured repository"
                )
        return self

    @model_validator(mode="after")
    def _jailed_servers_need_the_jail(self) -> Settings:
        for name, server in self.mcp.servers.items():
            if server.jail and not self.jail.enabled:
                raise ValueError(f"mcp.servers.{name}.jail: needs jail.enabled: true")
        return self

    def secrets(self) -> tuple[str, ...]:
        """Every secret value, for the log redaction processor."""
        app = self.github.app if self.github else None
        hooks = self.webhooks
        values = [
            self.github.token if self.github else None,
            app.private_key if app else None,
            self.gitlab.token if self.gitlab else None,
            self.llm.api_key,
            hooks.github_secret if hooks else None,
            hooks.gitlab_secret if hooks else None,
            self.store.dsn,
            self.ui.password if self.ui else None,
        ]
        found = [v.get_secret_value() for v in values if v and v.get_secret_value()]
        return (*found, *self.mcp.secrets())


@dataclass(frozen=True)
class Runtime:
    """What systemd tells the process through its environment (read here, and only here)."""

    notify_socket: str | None
    watchdog_usec: int | None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Runtime:
        env = os.environ if environ is None else environ
        usec = env.get("WATCHDOG_USEC", "")
        return cls(env.get("NOTIFY_SOCKET") or None, int(usec) if usec.isdigit() else None)


def load_settings(path: Path, environ: Mapping[str, str] | None = None) -> Settings:
    """Read, interpolate and validate one YAML file."""
    env = os.environ if environ is None else environ
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("", f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError("", f"config file {path} is not UTF-8 text") from None
    return parse_settings(text, env, base_dir=path.parent)


def parse_settings(text: str, environ: Mapping[str, str], base_dir: Path = Path()) -> Settings:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError("", f"not valid YAML{where}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("", "the top level must be a mapping of keys")
    # A mistyped key is the likeliest mistake, and it also shows up as a "missing" required key
    # or an unset variable elsewhere; naming the typo first is what makes the message useful.
    reject_unknown_keys(raw, Settings, "")
    resolved = _resolve(raw, "", environ, base_dir)
    try:
        return Settings.model_validate(resolved)
    except ValidationError as exc:
        raise first_error(exc) from None


def _resolve(node: Any, path: str, environ: Mapping[str, str], base_dir: Path) -> Any:
    """Interpolate `${VAR}` and read `<secret>_file` keys, tracking the key path."""
    if isinstance(node, str):
        return _interpolate(node, path, environ)
    if isinstance(node, list):
        return [_resolve(v, f"{path}[{i}]", environ, base_dir) for i, v in enumerate(node)]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        key_path = f"{path}.{key}" if path else str(key)
        if not isinstance(key, str):
            raise ConfigError(key_path, "keys must be strings")
        secret = key.removesuffix("_file")
        if key.endswith("_file") and (secret in SECRET_KEYS or _SECRET_MAPS.match(path)):
            if secret in node:
                raise ConfigError(key_path, f"give either '{secret}' or '{key}', not both")
            file_path = _resolve(value, key_path, environ, base_dir)
            out[secret] = _read_secret_file(file_path, key_path, environ, base_dir)
            continue
        out[key] = _resolve(value, key_path, environ, base_dir)
    return out


def _interpolate(value: str, path: str, environ: Mapping[str, str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise ConfigError(path, f"environment variable {name} is not set")

    return _ENV_REF.sub(substitute, value)


def _read_secret_file(value: Any, path: str, environ: Mapping[str, str], base_dir: Path) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(path, "must be a file path")
    file_path = Path(value).expanduser()
    if not file_path.is_absolute():
        # systemd's LoadCredential= puts files in $CREDENTIALS_DIRECTORY; a bare name means
        # "the credential of that name" when it is set, else a path beside the config file.
        creds = environ.get("CREDENTIALS_DIRECTORY")
        file_path = Path(creds) / file_path if creds else base_dir / file_path
    try:
        secret = file_path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(path, f"cannot read {file_path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(path, f"{file_path} is not UTF-8 text") from None
    except ValueError:  # a NUL byte or a lone surrogate in the path itself
        raise ConfigError(path, "is not a usable file path") from None
    if not secret:
        raise ConfigError(path, f"{file_path} is empty")
    return secret


def reject_unknown_keys(node: dict[Any, Any], model: type[BaseModel], path: str = "") -> None:
    """Raise for the first key, at any depth, that `model` does not know (list items too),
    naming its path and the closest valid key. Any settings model can be checked this way."""
    fields = {(info.alias or name): info.annotation for name, info in model.model_fields.items()}
    valid = list(fields) + [f"{key}_file" for key in fields if key in SECRET_KEYS]
    for key, value in node.items():
        if not isinstance(key, str):
            continue  # _resolve reports it with its path
        key_path = f"{path}.{key}" if path else key
        if key not in valid:
            if model.model_config.get("extra") != "forbid":
                continue
            near = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
            raise ConfigError(
                key_path, "unknown key" + (f" (did you mean {near[0]}?)" if near else "")
            )
        if key in fields:
            _check_value(value, fields[key], key_path)


def _check_value(value: Any, annotation: Any, path: str) -> None:
    """Walk into `value` along the models that `annotation` names (optional, tuple, list, dict)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if isinstance(value, dict):
            reject_unknown_keys(value, annotation, path)
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        # The model in `Model | None`. Between two models a key may be valid in either one:
        # pydantic decides which applies, and first_error still puts its unknown key first.
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        for arg in args if len(models) < 2 else ():
            _check_value(value, arg, path)
    elif origin in (tuple, list, set, frozenset) and isinstance(value, list):
        items = [a for a in args if a is not Ellipsis]
        for i, item in enumerate(value):
            item_type = items[i] if origin is tuple and len(items) > 1 and i < len(items) else None
            _check_value(item, item_type or (items[0] if items else Any), f"{path}[{i}]")
    elif origin in (dict, Mapping) and isinstance(value, dict) and len(args) == 2:
        for key, item in value.items():
            _check_value(item, args[1], f"{path}.{key}")


def first_error(exc: ValidationError) -> ConfigError:
    """The one error to report, as a `ConfigError` naming the key path."""
    errors = exc.errors(include_input=False, include_url=False)
    # An unknown key explains the other errors beside it (a typo also leaves a key missing).
    error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    path = ""
    for part in error["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part not in ("function-after[_owner_name(), tuple[str, ...]]",):
            path = f"{path}.{part}" if path else str(part)
    kind = error["type"]
    if kind == "extra_forbidden":
        problem = "unknown key"
    elif kind == "missing":
        problem = "required key is missing"
    else:
        problem = error["msg"].removeprefix("Value error, ")
    return ConfigError(path, problem)


def summary(settings: Settings) -> dict[str, Any]:
    """The settings as plain data with every secret masked, for `bot check-config`."""
    data: dict[str, Any] = settings.model_dump(mode="json")
    _mask(data)
    return data


def _mask(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in SECRET_KEYS and value:
                node[key] = "********"
            else:
                _mask(value)
