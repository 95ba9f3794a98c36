"""Git data as both forges report it: branch heads, tree entries, file changes, comparisons, change
requests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BranchHead:
    sha: str
    message: str


@dataclass(frozen=True)
class FileChange:
    path: str
    content: str | None  # None deletes the file; a symlink's content is its target
    existed: bool  # whether the file exists in the parent commit
    mode: str = "100644"  # git mode: "100644" file, "100755" executable, "120000" symlink


@dataclass(frozen=True)
class TreeEntry:
    """A file in a commit's tree: its git mode and the object id of its content."""

    mode: str
    sha: str


@dataclass(frozen=True)
class ChangedPaths:
    """What a comparison `base...head` (three dots: from their merge base) changes."""

    paths: frozenset[str]  # every path added, changed or removed (both names of a rename)
    complete: bool  # False when the forge cut the list (too many files to list)
    ancestor: bool  # `head` is already in `base`'s history: it brings nothing new


@dataclass(frozen=True)
class ChangeRequest:
    """A pull request (GitHub) or merge request (GitLab)."""

    number: int
    url: str
    head: str
    base: str
    draft: bool
