"""The repository at a pinned commit, downloaded once as an archive and cached by SHA.

Extraction is defensive: archives come from the forge, but their content comes from anyone who
can push. No member may leave the target directory (absolute paths, `..`), links are not
created (a symlink is written as a small text stub so the model still sees it exists), device
files are skipped, and the file count and total size are capped; what is skipped is listed in
`.snapshot-skipped` so the model can be told.

What publishing needs to write the repository back faithfully is kept in `.snapshot-meta.json`:
each executable's and each symlink's git mode, each symlink's target, and the paths that exist
in the commit but were left out (over a cap), so they are never mistaken for absent files.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.log import get_logger
from bot.core.walk import walk
from bot.forge.base import Forge

log = get_logger(__name__)
COMPLETE = ".snapshot-complete"
SKIPPED = ".snapshot-skipped"
META = ".snapshot-meta.json"
# Every extracted file with its size, in walk order: listing a 50,000-file snapshot is one read.
INDEX = ".snapshot-index.json"
# Renderings that depend only on the snapshot's paths (the directory trees), made once.
TREES = ".snapshot-trees.json"
TREES_VERSION = 1  # bump when the rendering changes: older caches are then recomputed
EXECUTABLE, SYMLINK = "100755", "120000"


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
        write_index(work)
        (work / COMPLETE).write_text(sha, encoding="utf-8")
        if target.exists():  # a concurrent or interrupted attempt: replace it
            shutil.rmtree(target)
        os.replace(work, target)
    finally:
        archive.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    log.info("snapshot_ready", repo=repo, sha=sha, skipped=len(skipped))
    return target


@dataclass
class _Meta:
    """Modes of the files that are not plain (path -> git mode), symlink targets, and the paths
    of files that exist in the commit but are not in the snapshot."""

    modes: dict[str, str]
    links: dict[str, str]
    absent: list[str]

    def save(self, dest: Path) -> None:
        data = {"modes": self.modes, "links": self.links, "absent": self.absent}
        (dest / META).write_text(json.dumps(data, sort_keys=True), encoding="utf-8")


def extract(archive: Path, dest: Path, limits: Limits) -> list[str]:
    """Extract regular files under one top-level directory; returns what was skipped and why.
    Writes `META` beside them."""
    skipped: list[str] = []
    meta = _Meta({}, {}, [])
    files = 0
    total = 0
    full = False
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
            path = str(relative)
            if member.issym() or member.islnk():
                # Never a real link: a stub for the model. A symlink's target is kept for
                # publishing; a hard link's content is unknown, so the file counts as left out.
                _write(dest, relative, f"(link to {member.linkname})\n".encode(), skipped)
                if member.issym():
                    meta.modes[path], meta.links[path] = SYMLINK, member.linkname
                else:
                    meta.absent.append(path)
                skipped.append(f"{relative}: link not followed")
                continue
            if not member.isfile():
                if not member.isdir():
                    skipped.append(f"{relative}: special file")
                continue
            if member.mode & 0o111:
                meta.modes[path] = EXECUTABLE
            if member.size > limits.max_file_bytes:
                meta.absent.append(path)
                skipped.append(f"{relative}: {member.size} bytes, over the per-file cap")
                continue
            if full or files >= limits.max_files or total + member.size > limits.max_total_bytes:
                meta.absent.append(path)  # known to exist: publishing must not "create" it
                if not full:
                    skipped.append(f"{relative} and the rest: snapshot cap reached")
                full = True
                continue
            source = tar.extractfile(member)
            if source is None:
                continue
            with source:
                if not _write(dest, relative, source.read(limits.max_file_bytes + 1), skipped):
                    meta.absent.append(path)
            files += 1
            total += member.size
    meta.save(dest)
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


def _write(dest: Path, relative: PurePosixPath, data: bytes, skipped: list[str]) -> bool:
    target = dest.joinpath(*relative.parts)
    # resolve() follows links: a link planted in a parent directory cannot redirect us.
    if not target.resolve().is_relative_to(dest.resolve()):
        skipped.append(f"{relative}: escapes the snapshot")
        return False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(data)
    except (NotADirectoryError, IsADirectoryError, FileExistsError):
        # A file and a directory of the same name (e.g. a link stub in the way).
        skipped.append(f"{relative}: conflicts with another entry")
        return False
    return True


# -- the cache: pinned while in use, evicted least-recently-used to a size --------------------
#
# `cache/snapshot-use/<sha>` belongs to `cache/snapshots/<sha>/`: a task using the snapshot
# holds a shared flock on it (the kernel drops it if the process dies), its mtime is the last
# use, and its content the snapshot's size in bytes. Eviction takes the exclusive lock without
# waiting, so a snapshot in use is never evicted, by this process or another one.

USE_DIR = "snapshot-use"
_EVICT_LOCK = ".evict.lock"
_STALE_PARTIAL_SECONDS = 24 * 3600
_scope = threading.local()


class Pin:
    """A shared lock on one snapshot for as long as a task uses it."""

    def __init__(self, cache: Path, sha: str) -> None:
        self.path = cache / USE_DIR / sha
        self._fd: int | None = None
        self.acquire()
        pins = getattr(_scope, "pins", None)
        if pins is not None:
            pins.append(self)

    def acquire(self) -> None:
        """(Again) when the use file was replaced: eviction deletes it under its lock."""
        if self._fd is not None and _same_file(self._fd, self.path):
            return
        self.release()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_SH)  # eviction holds the exclusive lock for a rename
            if _same_file(fd, self.path):
                break
            os.close(fd)  # evicted meanwhile: lock the new file instead
        self._fd = fd
        os.utime(fd)  # last use, for least-recently-used eviction

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.utime(self._fd)  # the end of a use is its last use
            os.close(self._fd)
            self._fd = None


@contextlib.contextmanager
def pin_scope() -> Iterator[None]:
    """Every snapshot pinned by this thread inside the block is released when it ends (a
    daemon worker wraps each task run in one); outside a scope a pin lasts as long as the
    workspace that holds it."""
    outer = getattr(_scope, "pins", None)
    _scope.pins = []
    try:
        yield
    finally:
        for pin in _scope.pins:
            pin.release()
        _scope.pins = outer


def pinned_snapshot(
    forge: Forge, repo: str, sha: str, cache: Path, limits: Limits, max_cache_bytes: int
) -> tuple[Path, Pin]:
    """The snapshot, pinned, and the cache evicted down to `max_cache_bytes` around it."""
    pin = Pin(cache, sha)
    try:
        root = refetch(forge, repo, sha, cache, limits, pin)
        evict(cache, max_cache_bytes)
    except BaseException:
        pin.release()
        raise
    return root, pin


def refetch(forge: Forge, repo: str, sha: str, cache: Path, limits: Limits, pin: Pin) -> Path:
    """The pinned snapshot, downloaded again if it is missing (evicted or deleted)."""
    pin.acquire()
    root = snapshot(forge, repo, sha, cache, limits)
    _size(cache, sha)  # recorded once, while pinned
    return root


def evict(cache: Path, max_bytes: int, clock: Clock = SYSTEM_CLOCK) -> list[str]:
    """Delete least-recently-used snapshots not in use until the cache holds `max_bytes` or
    less; returns the SHAs evicted. `clock`: compared with file times, which the kernel
    stamps: the host's clock (not the daemon's), unless a test moves it."""
    snapshots = cache / "snapshots"
    if not snapshots.is_dir():
        return []
    (cache / USE_DIR).mkdir(parents=True, exist_ok=True)
    evicted: list[str] = []
    with _exclusive(cache / USE_DIR / _EVICT_LOCK):  # one evictor at a time
        _drop_stale_partials(snapshots, clock.time())
        entries = [(_last_use(cache, p.name), p.name) for p in _complete(snapshots)]
        total = sum(_size(cache, sha) for _, sha in entries)
        for _, sha in sorted(entries):
            if total <= max_bytes:
                break
            size = _size(cache, sha)
            if _evict_one(cache, sha):
                evicted.append(sha)
                total -= size
    if evicted:
        log.info("snapshots_evicted", shas=evicted, cache_bytes=total, limit=max_bytes)
    return evicted


def _evict_one(cache: Path, sha: str) -> bool:
    use = cache / USE_DIR / sha
    fd = os.open(use, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # in use by a running task
        doomed = cache / "snapshots" / f".{sha}.evicted-{os.getpid()}"
        try:
            os.replace(cache / "snapshots" / sha, doomed)  # gone in one step for every reader
        except FileNotFoundError:
            return False  # deleted meanwhile by someone else
        finally:
            use.unlink(missing_ok=True)
    finally:
        os.close(fd)
    shutil.rmtree(doomed, ignore_errors=True)
    return True


def _complete(snapshots: Path) -> list[Path]:
    return [
        p for p in snapshots.iterdir() if not p.name.startswith(".") and (p / COMPLETE).exists()
    ]


def _last_use(cache: Path, sha: str) -> float:
    for path in (cache / USE_DIR / sha, cache / "snapshots" / sha / COMPLETE):
        try:
            return path.stat().st_mtime
        except FileNotFoundError:
            continue
    return 0.0


def _size(cache: Path, sha: str) -> int:
    use = cache / USE_DIR / sha
    try:
        return int(use.read_text(encoding="ascii"))
    except (FileNotFoundError, ValueError):
        pass
    total = 0
    for dirpath, _dirnames, filenames in os.walk(cache / "snapshots" / sha):
        for name in filenames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    try:
        mtime = use.stat().st_mtime
        use.write_text(str(total), encoding="ascii")
        os.utime(use, (mtime, mtime))  # recording the size is not a use
    except FileNotFoundError:
        fd = os.open(use, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, str(total).encode())
        os.close(fd)
    return total


def _drop_stale_partials(snapshots: Path, now: float) -> None:
    """Downloads a crashed process left behind (`.<sha>.*.partial`, `.<sha>.evicted-*`)."""
    for path in snapshots.iterdir():
        if not path.name.startswith("."):
            continue
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > _STALE_PARTIAL_SECONDS:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink()


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_index(root: Path) -> list[tuple[str, int]]:
    """List the snapshot's files once (atomically written), for every later listing."""
    entries = list(_walk(root))
    tmp = root / f"{INDEX}.tmp"
    tmp.write_text(
        json.dumps(entries, ensure_ascii=False), encoding="utf-8", errors="surrogateescape"
    )
    os.replace(tmp, root / INDEX)
    return entries


def read_index(root: Path) -> list[tuple[str, int]]:
    """The index, or a walk (written as the index) for a snapshot cached before it existed."""
    try:
        data = json.loads((root / INDEX).read_text(encoding="utf-8", errors="surrogateescape"))
        return [(str(path), int(size)) for path, size in data]
    except (OSError, ValueError, TypeError):
        return write_index(root)


def _walk(root: Path) -> Iterator[tuple[str, int]]:
    internal = {COMPLETE, SKIPPED, META, INDEX, f"{INDEX}.tmp", TREES, f"{TREES}.tmp"}
    for dirpath, dirnames, filenames in walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        base = os.path.relpath(dirpath, root)
        for name in sorted(filenames):
            rel = name if base == "." else f"{base}/{name}"
            if rel in internal:
                continue
            info = os.lstat(os.path.join(dirpath, name))
            yield rel, info.st_size
