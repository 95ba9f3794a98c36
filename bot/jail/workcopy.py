"""A writable copy of the repository for jailed commands, and what they changed in it.

The copy is the pinned snapshot with the task's changeset applied; it lives outside the state
dir (the jail could otherwise be pointed at it) and persists for the task run, so that what a
setup step installs stays for the checks. After a command, files it changed, created or
deleted are folded back into the changeset, except what the repository ignores (`.gitignore`)
and build debris. Nothing in the copy is trusted: files are examined with `lstat` and opened
with `O_NOFOLLOW`, so a link the command planted cannot make the daemon read outside the copy.
The copy's directory is an `Area` (bot.jail.disk): a size-limited filesystem of its own where
one can be had, so that commands cannot fill the host's disk.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pathspec

from bot.core.walk import walk
from bot.jail.disk import Area

MAX_FOLD_BYTES = 1024 * 1024  # one file; larger ones are reported, not folded
MAX_FOLD_FILES = 200
# Debris that no repository wants committed, whatever its .gitignore says.
ALWAYS_IGNORED = [
    ".git/",
    "__pycache__/",
    "*.pyc",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".venv/",
    "node_modules/",
    ".tox/",
    ".coverage",
    "*.egg-info/",
]
Signature = tuple[int, int, int]  # size, mtime_ns, inode


@dataclass
class Fold:
    """What a command changed: path -> new text (None: deleted), and what was left out."""

    changes: dict[str, str | None] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


class WorkCopy:
    def __init__(
        self,
        area: Area,
        snapshot: Path,
        owner: tuple[int, int] | None,
        on_remove: Callable[[], None] | None = None,
        cgroup: Path | None = None,
    ) -> None:
        self.area = area
        self.cgroup = cgroup  # where the copy's commands run, when there is one
        self.root = area.root  # the daemon's path to the files
        self.snapshot = snapshot
        self.owner = owner  # (uid, gid) commands run as, when the daemon is root
        self._on_remove = on_remove
        self._links: dict[str, str] = {}  # the repository's own symbolic links
        self._seen: dict[str, Signature] = {}
        self._ignore = pathspec.GitIgnoreSpec.from_lines(ALWAYS_IGNORED)

    @classmethod
    def create(
        cls,
        snapshot: Path,
        changes: Mapping[str, str | None],
        area: Area,
        owner: tuple[int, int] | None = None,
        on_remove: Callable[[], None] | None = None,
        links: Mapping[str, str] | None = None,
        executables: Iterable[str] = (),
        cgroup: Path | None = None,
        hidden: Collection[str] = (),
    ) -> WorkCopy:
        """`links` and `executables`: what the snapshot records but does not materialise (it
        never creates links); the copy has them, so the repository's scripts run as committed.
        `hidden`: the snapshot's own bookkeeping files (top level), which the copy leaves out.
        The copy owns `area` from here on: `remove` releases it, also when this fails."""
        copy = cls(area, snapshot, owner, on_remove, cgroup)
        try:
            copy._fill(changes, links, executables, frozenset(hidden))
        except BaseException:
            copy.remove()
            raise
        return copy

    def _fill(
        self,
        changes: Mapping[str, str | None],
        links: Mapping[str, str] | None,
        executables: Iterable[str],
        hidden: frozenset[str],
    ) -> None:
        top = str(self.snapshot)

        def ignored(directory: str, names: list[str]) -> set[str]:
            return {n for n in names if n in hidden} if directory == top else set()

        shutil.copytree(self.snapshot, self.root, dirs_exist_ok=True, ignore=ignored, symlinks=True)
        self._ignore = _ignore_spec(self.snapshot)
        self._links = dict(links or {})
        self._restore_modes(executables)
        self._apply(changes)
        self._chown_all()
        self._seen = dict(self._scan())

    def remove(self) -> None:
        try:
            self.area.release()
        finally:
            if self._on_remove is not None:  # the uid goes back to the pool whatever happened
                self._on_remove()
                self._on_remove = None

    def sync(self, changes: Mapping[str, str | None]) -> None:
        """Bring the copy up to the changeset (edits made by tools since the last command)."""
        touched = self._apply(changes)
        for rel in touched:
            self._own(self.root / rel)
        self._seen = dict(self._scan())

    def collect(self, changes: Mapping[str, str | None]) -> Fold:
        """Differences between the copy and snapshot + `changes`, since the last sync."""
        fold = Fold()
        now = dict(self._scan(fold.skipped))
        candidates = sorted(
            {p for p, sig in now.items() if self._seen.get(p) != sig} | (self._seen.keys() - now)
        )
        for rel in candidates:
            if self._ignore.match_file(rel):
                continue
            if len(fold.changes) >= MAX_FOLD_FILES:
                fold.skipped.append(f"{rel} and more: over {MAX_FOLD_FILES} changed files")
                break
            self._fold_one(rel, rel in now, changes, fold)
        self._seen = now
        return fold

    # -- internals ----------------------------------------------------------------------------

    def _fold_one(
        self, rel: str, present: bool, changes: Mapping[str, str | None], fold: Fold
    ) -> None:
        expected = self._expected(rel, changes)
        if not present:
            if expected is not None:
                fold.changes[rel] = None
            return
        data = _read_regular(self.root / rel, MAX_FOLD_BYTES)
        if data is None:
            fold.skipped.append(f"{rel}: not a regular file, or over {MAX_FOLD_BYTES} bytes")
            return
        if data == expected:
            return
        try:
            fold.changes[rel] = data.decode("utf-8")
        except UnicodeDecodeError:
            fold.skipped.append(f"{rel}: binary content is not folded into the changeset")

    def _expected(self, rel: str, changes: Mapping[str, str | None]) -> bytes | None:
        if rel in changes:
            content = changes[rel]
            return None if content is None else content.encode("utf-8")
        source = self.snapshot / rel
        return _read_regular(source, 64 * MAX_FOLD_BYTES)

    def _apply(self, changes: Mapping[str, str | None]) -> list[str]:
        touched: list[str] = []
        for rel, content in changes.items():
            target = self._safe_path(rel)
            if content is None:
                if target.is_symlink() or target.exists():
                    _remove(target)
                continue
            data = content.encode("utf-8")
            if _read_regular(target, len(data) + 1) == data:
                continue
            if target.is_symlink() or target.exists():
                _remove(target)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            touched.append(rel)
        return touched

    def _restore_modes(self, executables: Iterable[str]) -> None:
        for rel, target in self._links.items():
            path = self._safe_path(rel)
            if path.is_symlink() or path.exists():
                _remove(path)  # the snapshot's text stub for the link
            os.symlink(target, path)
        for rel in executables:
            path = self._safe_path(rel)
            if path.is_file() and not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o111)

    def _safe_path(self, rel: str) -> Path:
        """`rel` inside the copy with every parent a real directory (links a command planted
        on the way are removed first), so that no write or delete can land outside it."""
        current = self.root
        for part in PurePosixPath(rel).parts[:-1]:
            current = current / part
            if current.is_symlink() or (current.exists() and not current.is_dir()):
                _remove(current)
            if not current.exists():
                current.mkdir()
        return current / PurePosixPath(rel).name

    def _scan(self, skipped: list[str] | None = None) -> Iterator[tuple[str, Signature]]:
        for dirpath, dirnames, filenames in walk(self.root, skipped):  # never follows links
            base = PurePosixPath(Path(dirpath).relative_to(self.root))
            dirnames[:] = [d for d in dirnames if not self._ignore.match_file(f"{base / d}/")]
            for name in filenames:
                rel = str(base / name) if str(base) != "." else name
                if not _clean_name(rel):
                    if skipped is not None:
                        skipped.append(f"{rel!r}: not a UTF-8 file name without control characters")
                    continue
                info = os.lstat(os.path.join(dirpath, name))
                if stat.S_ISREG(info.st_mode):
                    yield rel, (info.st_size, info.st_mtime_ns, info.st_ino)
                elif stat.S_ISLNK(info.st_mode) and self._is_original_link(rel):
                    continue
                elif skipped is not None and not self._ignore.match_file(rel):
                    skipped.append(f"{rel}: links and special files are not folded")

    def _is_original_link(self, rel: str) -> bool:
        try:
            return self._links.get(rel) == os.readlink(self.root / rel)
        except OSError:
            return False

    def _chown_all(self) -> None:
        if self.owner is None:
            return
        os.lchown(self.root, *self.owner)
        for dirpath, dirnames, filenames in walk(self.root):
            for name in dirnames + filenames:
                os.lchown(os.path.join(dirpath, name), *self.owner)

    def _own(self, path: Path) -> None:
        if self.owner is not None:
            os.lchown(path, *self.owner)
            for parent in path.relative_to(self.root).parents:
                os.lchown(self.root / parent, *self.owner)


def _clean_name(rel: str) -> bool:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not any(ord(ch) < 32 or ord(ch) == 127 for ch in rel)


def _ignore_spec(snapshot: Path) -> pathspec.GitIgnoreSpec:
    """ALWAYS_IGNORED plus every .gitignore in the snapshot, anchored at its directory."""
    lines = list(ALWAYS_IGNORED)
    for ignore_file in sorted(snapshot.rglob(".gitignore")):
        prefix = ignore_file.parent.relative_to(snapshot).as_posix()
        text = (_read_regular(ignore_file, MAX_FOLD_BYTES) or b"").decode("utf-8", "replace")
        lines += [_anchor(line, prefix) for line in text.splitlines()]
    return pathspec.GitIgnoreSpec.from_lines([line for line in lines if line])


def _anchor(line: str, prefix: str) -> str:
    stripped = line.strip()
    if not stripped or stripped.startswith("#") or prefix in ("", "."):
        return stripped if not stripped.startswith("#") else ""
    negate = "!" if stripped.startswith("!") else ""
    pattern = stripped.lstrip("!")
    if "/" in pattern.rstrip("/"):  # anchored to its directory
        return f"{negate}{prefix}/{pattern.lstrip('/')}"
    return f"{negate}{prefix}/**/{pattern}"


def _read_regular(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file, never through a link or from a FIFO; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        data = handle.read(limit + 1)
    return data if len(data) <= limit else None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
