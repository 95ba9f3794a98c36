"""`config.example.yaml` is what people copy: it loads with the real loader, and it shows every
key of the schema (`bot/core/config.py`), each with its default.

A key counts as shown when the file writes it, or writes it as a commented-out line at the
place it would go (`# key: value`, at the key's own indentation after the `# `). Commented
lines must count: some keys cannot be live together in a file that loads (`github.token` or
`github.app`; `store.dsn` only with the postgres backend; `webhooks` and `metrics` open
listeners; a secret inline or as `<key>_file`), so the file shows those as YAML a reader
uncomments. A mention in prose does not count: its place in the schema cannot be told, and
the loader's own unknown-key check is run over the uncommented lines, so a commented key
that is not in the schema fails too. A map of settings (`jail.repositories`) shows its keys
through one example entry.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from bot.core.config import SECRET_KEYS, ConfigError, Settings, load_settings, reject_unknown_keys

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.yaml"
# `# key: ...` or `# owner/name: ...` (a map's example entry); prose has spaces before its colon.
_COMMENTED_KEY = re.compile(
    r"^(?P<indent>\s*)# (?P<line> *(?:[a-z_][a-z0-9_]*|[\w.-]+(?:/[\w.-]+)+):(?: .*)?)$"
)


def uncommented(text: str) -> str:
    """The file with every commented-out key line turned back into YAML at its place."""
    lines = []
    for line in text.splitlines():
        match = _COMMENTED_KEY.match(line)
        lines.append(match["indent"] + match["line"] if match else line)
    return "\n".join(lines) + "\n"


def _model(annotation: Any) -> type[BaseModel] | None:
    """The settings model `annotation` names (`Model` or `Model | None`), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [m for m in map(_model, typing.get_args(annotation)) if m is not None]
        return models[0] if len(models) == 1 else None
    return None


def _entry_model(annotation: Any) -> type[BaseModel] | None:
    """The model of each value of a map of settings (`dict[str, Model]`), if it is one."""
    if typing.get_origin(annotation) is dict:
        return _model(typing.get_args(annotation)[1])
    return None


def missing_keys(model: type[BaseModel], shown: Any, path: str = "") -> list[str]:
    """Every key of `model` (at any depth) that the mapping `shown` does not show."""
    shown = shown if isinstance(shown, dict) else {}
    missing: list[str] = []
    for name, field in model.model_fields.items():
        key = f"{path}.{name}" if path else name
        spelled = [name, f"{name}_file"] if name in SECRET_KEYS else [name]
        given = [spelling for spelling in spelled if spelling in shown]
        if not given:
            missing.append(key)
            continue
        value = shown[given[0]]
        nested, entry = _model(field.annotation), _entry_model(field.annotation)
        if nested is not None:
            missing += missing_keys(nested, value, key)
        elif entry is not None:
            entries = value.values() if isinstance(value, dict) else []
            merged = {k: v for e in entries if isinstance(e, dict) for k, v in e.items()}
            missing += missing_keys(entry, merged, f"{key}.<entry>")
    return missing


def shown_view() -> dict[str, Any]:
    """The example with its commented-out keys, checked by the loader's unknown-key rule."""
    try:
        view = yaml.safe_load(uncommented(EXAMPLE.read_text(encoding="utf-8")))
    except yaml.YAMLError as exc:  # e.g. `# key: {flow}` with more commented keys below it
        pytest.fail(f"config.example.yaml: commented-out keys that are not YAML uncommented: {exc}")
    assert isinstance(view, dict)
    try:
        reject_unknown_keys(view, Settings)
    except ConfigError as exc:
        pytest.fail(f"config.example.yaml shows a key the schema does not have: {exc}")
    return view


def _load(tmp_path: Path) -> Settings:
    """The example as the daemon would load it: `${GITHUB_TOKEN}` from the environment and
    `token_file: gitlab-token` from systemd's credentials directory."""
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "gitlab-token").write_text("glpat-exampleexampleexample\n", encoding="utf-8")
    environ = {
        "GITHUB_TOKEN": "ghp_exampleexampleexample",
        "CREDENTIALS_DIRECTORY": str(credentials),
    }
    return load_settings(EXAMPLE, environ)


def test_the_example_loads_with_the_real_loader(tmp_path: Path) -> None:
    settings = _load(tmp_path)
    assert settings.github is not None and settings.gitlab is not None
    assert settings.github.token is not None
    assert settings.github.token.get_secret_value() == "ghp_exampleexampleexample"
    assert settings.gitlab.token.get_secret_value() == "glpat-exampleexampleexample"


def test_the_example_shows_every_key_of_the_schema() -> None:
    missing = missing_keys(Settings, shown_view())
    assert not missing, "config.example.yaml does not show: " + ", ".join(missing)


def test_a_key_the_example_leaves_out_is_named() -> None:
    """The check itself: keys taken out of the example's view are named, and only those."""
    view = shown_view()
    del view["github"]["app"]["refresh_minutes"]
    for entry in view["jail"]["repositories"].values():
        del entry["setup_network"]
    del view["store"]["dsn"], view["store"]["dsn_file"]
    assert missing_keys(Settings, view) == [
        "github.app.refresh_minutes",
        "jail.repositories.<entry>.setup_network",
        "store.dsn",
    ]


# Written as a placeholder, not as the default: `()` does not load with a token (one
# repository at least), so the file names the form instead (`[owner/name]`).
PLACEHOLDERS = frozenset({"github.repositories"})


def _differences(model: BaseModel, written: Any, path: str = "") -> list[str]:
    """Keys written in the file (live, not commented) whose value is not the schema default;
    secrets, required keys and `PLACEHOLDERS` have no default to show."""
    written = written if isinstance(written, dict) else {}
    out: list[str] = []
    for name, field in type(model).model_fields.items():
        key = f"{path}.{name}" if path else name
        value = getattr(model, name)
        if name not in written or isinstance(value, SecretStr) or key in PLACEHOLDERS:
            continue
        if isinstance(value, BaseModel):
            out += _differences(value, written[name], key)
        elif field.default is not PydanticUndefined or field.default_factory is not None:
            default = field.get_default(call_default_factory=True)
            if value != default:
                out.append(f"{key} (written {value!r}, default {default!r})")
    return out


def test_every_value_written_is_the_default(tmp_path: Path) -> None:
    """The file's first line promises it: copying it changes nothing but the sources."""
    written = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    differences = _differences(_load(tmp_path), written)
    assert not differences, "config.example.yaml is not the default for: " + "; ".join(differences)
