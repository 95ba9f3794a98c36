"""`docs/architecture.md` stays true: every module of `bot/` and `bot_sandbox/` has its line in
the module map, and every test it names as proof of an invariant exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
_TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


def _modules() -> list[str]:
    """Every module, but the `__init__.py` files that only describe or re-export a package."""
    found = []
    for package in ("bot", "bot_sandbox"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            defines = any(isinstance(n, ast.FunctionDef | ast.ClassDef) for n in tree.body)
            if path.name != "__init__.py" or defines:
                found.append(path.relative_to(ROOT).as_posix())
    return found


def _tests_defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }


def test_every_module_has_its_line_in_the_map() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = [module for module in _modules() if f"- `{module}`:" not in text]
    assert not missing, "docs/architecture.md has no line for: " + ", ".join(missing)


def test_every_test_named_exists() -> None:
    refs = _TEST_REF.findall(DOC.read_text(encoding="utf-8"))
    assert len(refs) >= 16  # at least one per invariant
    absent = [
        f"{path}::{name}"
        for path, name in refs
        if not (ROOT / path).is_file() or name not in _tests_defined(ROOT / path)
    ]
    assert not absent, "docs/architecture.md names tests that do not exist: " + ", ".join(absent)
