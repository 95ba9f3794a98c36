"""The repository as the agent sees it: the pinned snapshot with the task's changeset on top.

The changeset lives in the task state (path -> new text, or None for a deleted file), so it
survives pause and restart and is written atomically with every other step.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from bot.repo.listing import Listing, snapshot_listing
from bot.repo.protected import DEFAULT_GUARD, PathGuard
from bot.repo.snapshot import COMPLETE, INDEX, META, SKIPPED, TREES

MAX_WRITE_BYTES = 1024 * 1024
MAX_CHANGESET_BYTES = 8 * 1024 * 1024
HIDDEN = {COMPLETE, SKIPPED, META, INDEX, TREES}
REGULAR = "100644"


class WorkspaceError(Exception):
    """A bad path or an impossible edit; its text is shown to the model as the tool result."""


class Entry(NamedTuple):  # a tuple: listing 50,000 files makes 50,000 of them
    path: str
    size: int
    is_dir: bool


class Workspace:
    def __init__(
        self,
        root: Path,
        changes: dict[str, str | None],
        guard: PathGuard = DEFAULT_GUARD,
        refetch: Callable[[], Path] | None = None,
    ) -> None:
        self.root = root
        self.changes = changes  # shared with the task state: edits here are saved with it
        self.guard = guard  # protected paths (CI definitions): every change is checked
        # Downloads the snapshot again when it is missing from the cache (deleted by an
        # operator): a missing cache must never read as missing files.
        self.refetch = refetch

    def snapshot_root(self) -> Path:
        """The snapshot directory, downloaded again first if it went missing from the cache
        (callers that copy it, such as the jail, use this rather than `root`)."""
        if self.refetch is not None and not (self.root / COMPLETE).exists():
            self.root = self.refetch()
        return self.root

    # -- paths --------------------------------------------------------------------------------

    def normalize(self, path: str) -> str:
        text = path.strip().replace("\\", "/")
        if "\x00" in text:
            raise WorkspaceError("error: path contains a NUL byte")
        while text.startswith("./"):
            text = text[2:]
        pure = PurePosixPath(text)
        if pure.is_absolute():
            raise WorkspaceError(
                f"error: {path!r} is absolute; use a path relative to the repository root"
            )
        if ".." in pure.parts:
            raise WorkspaceError(f"error: {path!r} leaves the repository ('..' is not allowed)")
        normal = str(pure)
        if normal in ("", "."):
            return ""
        if normal.split("/")[0] in (".git",) or normal in HIDDEN:
            raise WorkspaceError(f"error: {path!r} is not part of the repository")
        return normal

    def _disk(self, rel: str) -> Path:
        self.snapshot_root()
        target = self.root.joinpath(*PurePosixPath(rel).parts) if rel else self.root
        if not target.resolve().is_relative_to(self.root.resolve()):
            raise WorkspaceError(f"error: {rel!r} leaves the repository")
        return target

    # -- reading ------------------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        rel = self.normalize(path)
        if rel in self.changes:
            content = self.changes[rel]
            if content is None:
                raise WorkspaceError(f"error: {rel} was deleted in this task")
            return content.encode("utf-8")
        self._refuse_left_out(rel, "read")
        disk = self._disk(rel)
        if not disk.is_file() and not (self.root / COMPLETE).exists():
            disk = self._disk(rel)  # the cache was deleted under us: fetched again
        if not disk.is_file():
            hint = " (it is a directory; use list_files)" if disk.is_dir() else ""
            raise WorkspaceError(f"error: no file {rel!r}{hint}")
        return disk.read_bytes()

    def same_paths_as_snapshot(self) -> bool:
        """Whether the changeset only edits files the snapshot has (no file added or deleted):
        then anything computed from the snapshot's paths holds for the workspace too."""
        return all(
            content is not None and self.exists_in_snapshot(path) and not self.left_out(path)
            for path, content in self.changes.items()
        )

    def read_listed(self, rel: str) -> bytes | None:
        """A file named by `files()` (so already a clean relative path of the snapshot, where
        extraction never creates links): read without re-checking the path, for bulk reads."""
        if rel in self.changes:
            content = self.changes[rel]
            return None if content is None else content.encode("utf-8")
        try:
            return _read_all(os.path.join(self.root, rel))
        except OSError:
            return None

    def exists_in_snapshot(self, rel: str) -> bool:
        """Whether the pinned commit has this file, in the snapshot or left out of it."""
        return rel in self._absent or self._disk(rel).is_file()

    def snapshot_bytes(self, rel: str) -> bytes | None:
        """The file as the pinned commit has it (a symlink: its target), None when absent."""
        if rel in self._links:
            return self._links[rel].encode("utf-8", "surrogateescape")
        disk = self._disk(rel)
        return disk.read_bytes() if disk.is_file() else None

    def mode(self, rel: str) -> str:
        """The file's git mode in the pinned commit (a new file is a regular one)."""
        return str(self._meta.get("modes", {}).get(rel, REGULAR))

    def link_target(self, rel: str) -> str | None:
        return self._links.get(rel)

    def links(self) -> dict[str, str]:
        """Every symbolic link of the pinned commit: path -> target."""
        return dict(self._links)

    def executables(self) -> list[str]:
        modes = self._meta.get("modes", {})
        return sorted(str(p) for p, mode in modes.items() if mode == "100755")

    def left_out(self, rel: str) -> bool:
        """The pinned commit has this file but the snapshot does not (over a cap)."""
        return rel in self._absent

    def left_out_under(self, prefix: str) -> list[str]:
        return sorted(p for p in self._absent if p.startswith(prefix))

    @cached_property
    def _meta(self) -> dict[str, Any]:
        path = self.snapshot_root() / META  # fetched again first if the cache lost it
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        except (OSError, ValueError):
            data = {}
        return data if isinstance(data, dict) else {}

    @cached_property
    def _links(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._meta.get("links", {}).items()}

    @cached_property
    def _absent(self) -> frozenset[str]:
        return frozenset(str(p) for p in self._meta.get("absent", []))

    def listing(self) -> Listing:
        """`files()` as paths and sizes: the snapshot's own, shared and parsed once, when the
        changeset is empty (the usual opening context); else merged anew."""
        if not self.changes:
            return snapshot_listing(self.snapshot_root())
        return Listing((entry.path, entry.size) for entry in self.files())

    def files(self) -> Iterator[Entry]:
        """Every file, snapshot and changeset merged, in path order."""
        seen: set[str] = set()
        listing = snapshot_listing(self.snapshot_root())  # one read, not a walk
        for rel, size in zip(listing.paths, listing.sizes, strict=True):
            seen.add(rel)
            if rel in self.changes:
                content = self.changes[rel]
                if content is not None:
                    yield Entry(rel, len(content.encode()), False)
                continue
            yield Entry(rel, size, False)
        for rel, content in sorted(self.changes.items()):
            if rel not in seen and content is not None:
                yield Entry(rel, len(content.encode()), False)

    def skipped(self) -> list[str]:
        path = self.snapshot_root() / SKIPPED
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    # -- writing ------------------------------------------------------------------------------

    def write(self, path: str, content: str) -> str:
        rel = self.normalize(path)
        if not rel:
            raise WorkspaceError("error: a file path is required")
        self.check_changeable(rel)
        self._refuse_left_out(rel, "changed")
        target = self.link_target(rel)
        if target is not None:
            # Writing text over a link would turn it into a file (or, on GitLab, repoint it).
            raise WorkspaceError(
                f"error: {rel} is a symbolic link to {target!r}; change the file it points to"
            )
        size = len(content.encode("utf-8"))
        if size > MAX_WRITE_BYTES:
            raise WorkspaceError(
                f"error: {size} bytes is over the {MAX_WRITE_BYTES}-byte limit per file"
            )
        if self._disk(rel).is_dir():
            raise WorkspaceError(f"error: {rel!r} is a directory")
        total = sum(len(c.encode()) for p, c in self.changes.items() if c is not None and p != rel)
        if total + size > MAX_CHANGESET_BYTES:
            raise WorkspaceError(
                "error: the changeset is over its size limit; finish or write less"
            )
        self.changes[rel] = content
        return rel

    def check_changeable(self, rel: str) -> None:
        """Refuse a protected path; every write or delete of a path calls this first."""
        refusal = self.guard.refusal(rel)
        if refusal is not None:
            raise WorkspaceError(refusal)

    def _refuse_left_out(self, rel: str, verb: str) -> None:
        if rel in self._absent:
            raise WorkspaceError(
                f"error: {rel} exists in the repository but was left out of this task's "
                f"snapshot (over its size limits), so it cannot be {verb} here"
            )

    def edit(self, path: str, old: str, new: str) -> str:
        rel = self.normalize(path)
        self._refuse_left_out(rel, "changed")
        text = self.text(rel)
        count = text.count(old)
        if count == 0:
            raise WorkspaceError(
                f"error: the text to replace was not found in {rel}; read the file again"
            )
        if count > 1:
            raise WorkspaceError(
                f"error: the text to replace occurs {count} times in {rel}; include more context"
            )
        return self.write(rel, text.replace(old, new, 1))

    def text(self, path: str) -> str:
        data = self.read(path)
        if is_binary(data):
            raise WorkspaceError(f"error: {path} is a binary file")
        return data.decode("utf-8", errors="replace")


def is_binary(data: bytes) -> bool:
    head = data[:8192]
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 4  # a cut multi-byte char at the end is not binary
    return False


def _read_all(path: str) -> bytes:
    # Plain descriptor reads: a search reads up to 2,000 files, and a buffered file object
    # costs about twice as much per small file.
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
