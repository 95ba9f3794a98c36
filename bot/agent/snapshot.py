"""The repository at a pinned commit, downloaded once as an archive and cached by SHA.

Extraction is defensive: archives come from the forge, but their content comes from anyone who
can push. No member may leave the target directory (absolute paths, `..`), links are not
created (a symlink is recorded as a small text stub so the model still sees it exists), device
files are skipped, and the file count and total size are capped; what is skipped is listed in
`.snapshot-skipped` so the model can be told.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bot.forge.base import Forge
from bot.log import get_logger

log = get_logger(__name__)
COMPLETE = ".snapshot-complete"
SKIPPED = ".snapshot-skipped"


@dataclass(frozen=True)
class Limits:
    max_files: int = 50_000
    max_total_bytes: int = 512 * 1024 * 1024
    max_file_bytes: int = 5 * 1024 * 1024


class SnapshotError(Exception):
    """The archive could not be used (corrupt, not a tarball)."""


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def snapshot(forge: Forge, repo: str, sha: str, cache: Path, limits: Limits = Limits()) -> Path:
    """The extracted tree of `repo` at `sha`, from the cache when it is there.

    Workers on the same commit wait for one download instead of racing each other.
    """
    target = cache / "snapshots" / sha
    if (target / COMPLETE).exists():
        return target
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(sha, threading.Lock())
    with lock:
        if (target / COMPLETE).exists():
            return target
        return _download(forge, repo, sha, cache, target, limits)


def _download(forge: Forge, repo: str, sha: str, cache: Path, target: Path, limits: Limits) -> Path:
    cache.joinpath("snapshots").mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{sha}.", suffix=".partial", dir=cache / "snapshots"))
    archive = work.with_suffix(".tar.gz")
    try:
        forge.download_archive(repo, sha, archive)
        skipped = extract(archive, work, limits)
        (work / SKIPPED).write_text("\n".join(skipped), encoding="utf-8")
        (work / COMPLETE).write_text(sha, encoding="utf-8")
        if target.exists():  # a concurrent or interrupted attempt: replace it
            shutil.rmtree(target)
        os.replace(work, target)
    finally:
        archive.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    log.info("snapshot_ready", repo=repo, sha=sha, skipped=len(skipped))
    return target


def extract(archive: Path, dest: Path, limits: Limits) -> list[str]:
    """Extract regular files under one top-level directory; returns what was skipped and why."""
    skipped: list[str] = []
    files = 0
    total = 0
    try:
        tar = tarfile.open(archive, mode="r:*")  # noqa: SIM115 - closed by the `with` below
    except (tarfile.TarError, OSError) as exc:
        raise SnapshotError(f"not a readable archive: {exc}") from None
    with tar:
        for member in _members(tar, skipped):
            relative = _relative(member.name)
            if relative is None:
                skipped.append(f"{member.name}: unsafe path")
                continue
            if member.issym() or member.islnk():
                _write(dest, relative, f"(link to {member.linkname})\n".encode(), skipped)
                skipped.append(f"{relative}: link not followed")
                continue
            if not member.isfile():
                if not member.isdir():
                    skipped.append(f"{relative}: special file")
                continue
            if member.size > limits.max_file_bytes:
                skipped.append(f"{relative}: {member.size} bytes, over the per-file cap")
                continue
            if files >= limits.max_files or total + member.size > limits.max_total_bytes:
                skipped.append(f"{relative} and the rest: snapshot cap reached")
                break
            source = tar.extractfile(member)
            if source is None:
                continue
            with source:
                _write(dest, relative, source.read(limits.max_file_bytes + 1), skipped)
            files += 1
            total += member.size
    return skipped


def _members(tar: tarfile.TarFile, skipped: list[str]) -> list[tarfile.TarInfo]:
    try:
        return list(tar)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise SnapshotError(f"corrupt archive: {exc}") from None


def _relative(name: str) -> PurePosixPath | None:
    """Strip the archive's top directory; refuse anything that could escape."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\x00" in name:
        return None
    parts = path.parts[1:]  # forges wrap everything in one top-level directory
    if not parts:
        return None
    return PurePosixPath(*parts)


def _write(dest: Path, relative: PurePosixPath, data: bytes, skipped: list[str]) -> None:
    target = dest.joinpath(*relative.parts)
    # resolve() follows links: a link planted in a parent directory cannot redirect us.
    if not target.resolve().is_relative_to(dest.resolve()):
        skipped.append(f"{relative}: escapes the snapshot")
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)
    except (NotADirectoryError, IsADirectoryError, FileExistsError):
        # A file and a directory of the same name (e.g. a link stub in the way).
        skipped.append(f"{relative}: conflicts with another entry")
