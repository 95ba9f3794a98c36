"""The emulator's state: users, repositories, threads, comments, files. Platform-neutral.

Tests seed it through the helper methods and read it back to check what the daemon did.
All access goes through `World.lock` because the HTTP server is threaded.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import io
import itertools
import tarfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

ROLES = ("none", "read", "triage", "write", "maintain", "admin")


def _level(role: str | None) -> int:
    return ROLES.index(role) if role in ROLES else 0


def utcnow() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


class StepClock:
    """A clock that advances `step` seconds on every reading: distinct, ordered timestamps."""

    def __init__(self, start: datetime | None = None, step: float = 1.0) -> None:
        self._now = start or utcnow()
        self._step = timedelta(seconds=step)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self._now += self._step
            return self._now


@dataclass
class SUser:
    login: str
    id: int
    token: str | None = None
    is_bot: bool = False


@dataclass
class SComment:
    id: int
    author: SUser
    body: str
    created_at: datetime
    updated_at: datetime
    system: bool = False
    review: bool = False  # GitHub PR review comment / GitLab diff note
    position: SPosition | None = None  # where on the diff a review comment sits
    in_reply_to: int | None = None  # the comment it answers in a review thread
    review_id: int | None = None  # GitHub: the review that submitted it
    discussion: str = ""  # GitLab: the discussion (thread) it belongs to
    internal: bool = False  # GitLab internal note


@dataclass
class SPosition:
    """A line of a request's diff: `line` in the new file, `old_line` in the old one (both for
    an unchanged line, one of them for an added or removed line)."""

    path: str
    line: int | None
    old_line: int | None
    diff_hunk: str
    commit: str


@dataclass
class SReview:
    """A GitHub pull request review: its own text and verdict; line comments point to it."""

    id: int
    author: SUser
    body: str
    state: str  # APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED
    submitted_at: datetime
    commit_id: str


@dataclass
class SEvent:
    """Who labelled or assigned a thread, as both forges record it (GitHub issue events,
    GitLab resource label events and assignment system notes)."""

    id: int
    kind: str  # "labeled", "unlabeled", "assigned", "unassigned"
    name: str  # the label, or the assignee's login
    actor: SUser
    at: datetime


@dataclass
class SThread:
    number: int
    kind: str  # "issue", "pull" (GitHub) or "mr" (GitLab)
    id: int
    title: str
    body: str
    author: SUser
    created_at: datetime
    updated_at: datetime
    labels: list[str] = field(default_factory=list)
    assignees: list[SUser] = field(default_factory=list)
    state: str = "open"
    comments: list[SComment] = field(default_factory=list)
    reviews: list[SReview] = field(default_factory=list)
    head_ref: str = ""
    base_ref: str = "main"
    head_sha: str = ""
    change: SChangeRequest | None = None  # set when the bot opened it
    events: list[SEvent] = field(default_factory=list)
    locked: bool = False  # GitLab `discussion_locked` (the /lock quick action)
    approved_by: list[str] = field(default_factory=list)  # GitLab approvals (/approve)
    head_repo: str = ""  # a fork's path when the request comes from one; "" = same repository
    # GitHub `maintainer_can_modify` / GitLab `allow_collaboration`: the fork's owner lets
    # people with write access to this repository push to the request's branch in the fork.
    maintainer_can_modify: bool = False
    head_repo_id: int = 0  # the fork's id (GitLab `source_project_id`); 0 = this repository


# Git file modes: a regular file, an executable, a symbolic link (its blob holds the target).
# A path missing from a `modes` mapping is a regular file.
REGULAR, EXECUTABLE, SYMLINK = "100644", "100755", "120000"


def tree_sha(files: Mapping[str, bytes], modes: Mapping[str, str] | None = None) -> str:
    digest = hashlib.sha1(b"tree")
    for path, data in sorted(files.items()):
        mode = (modes or {}).get(path, REGULAR)
        digest.update(f"{mode} {path}".encode() + b"\0" + hashlib.sha1(data).digest())
    return digest.hexdigest()


@dataclass
class SCommit:
    sha: str
    files: dict[str, bytes]
    message: str
    parents: list[str]
    author: str = "alice"
    modes: dict[str, str] = field(default_factory=dict)  # path -> mode, regular files left out

    @property
    def tree(self) -> str:
        return tree_sha(self.files, self.modes)


@dataclass
class SChangeRequest:
    """A pull request (GitHub) or merge request (GitLab) opened through the API."""

    title: str
    body: str
    head: str
    base: str
    draft: bool


@dataclass
class SRepo:
    platform: str
    path: str
    id: int
    owner: SUser
    default_branch: str = "main"
    commits: dict[str, SCommit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)  # branch -> commit sha
    trees: dict[str, dict[str, bytes]] = field(default_factory=dict)  # GitHub git data API
    tree_modes: dict[str, dict[str, str]] = field(default_factory=dict)  # tree sha -> modes
    subtrees: dict[str, tuple[str, str]] = field(default_factory=dict)  # sha -> (root, "dir/")
    threads: dict[tuple[str, int], SThread] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)  # login -> role
    deleted: set[tuple[str, int]] = field(default_factory=set)  # (kind, number) of threads
    created_at: datetime = field(default_factory=utcnow)
    archive_override: bytes | None = None  # hostile-archive tests serve crafted tarballs
    # Refusals a real forge makes (tests set them): archived repositories refuse every
    # write; protected branches (fnmatch patterns) refuse pushes; GitHub private repositories
    # on the Free plan refuse draft pull requests.
    archived: bool = False
    protected: list[str] = field(default_factory=list)
    drafts_supported: bool = True
    # A fork: the path of the repository it was forked from. A fork network shares one object
    # store (GitHub serves a fork request's head in the parent as `refs/pull/<n>/head`), so the
    # fork's `commits`, `trees` and `tree_modes` are the parent's own dictionaries.
    fork_of: str | None = None

    def is_protected(self, branch: str) -> bool:
        return any(fnmatch.fnmatchcase(branch, pattern) for pattern in self.protected)

    def thread(self, kind: str, number: int) -> SThread | None:
        return self.threads.get((kind, number))

    def resolve(self, ref: str) -> SCommit | None:
        return self.commits.get(self.branches.get(ref, ref))

    def files(self, ref: str) -> dict[str, bytes] | None:
        commit = self.resolve(ref)
        return commit.files if commit else None

    def file_at(self, ref: str, path: str) -> bytes | None:
        """`path`'s content at `ref`, or None when either does not exist."""
        return (self.files(ref) or {}).get(path)

    def modes(self, ref: str) -> dict[str, str] | None:
        """Every path's git mode at `ref` (regular files included)."""
        commit = self.resolve(ref)
        if commit is None:
            return None
        return {path: commit.modes.get(path, REGULAR) for path in commit.files}

    def branch_sha(self, branch: str) -> str:
        return self.branches[branch]

    def commit(
        self,
        files: dict[str, bytes],
        message: str,
        parents: list[str],
        author: str,
        modes: Mapping[str, str] | None = None,
    ) -> SCommit:
        kept = {p: m for p, m in (modes or {}).items() if p in files and m != REGULAR}
        seed = f"{tree_sha(files, kept)}|{message}|{','.join(parents)}|{len(self.commits)}"
        commit = SCommit(
            hashlib.sha1(seed.encode()).hexdigest(), dict(files), message, parents, author, kept
        )
        self.commits[commit.sha] = commit
        self.trees[commit.tree] = commit.files
        self.tree_modes[commit.tree] = commit.modes
        return commit

    def blob(self, sha: str) -> bytes | None:
        """A file's content by its git object id (any commit's)."""
        for commit in self.commits.values():
            for data in commit.files.values():
                if blob_sha(data) == sha:
                    return data
        return None

    def is_ancestor(self, ancestor: str, sha: str) -> bool:
        """Whether `ancestor` is `sha` or reachable from it: a fast-forward."""
        todo, seen = [sha], set()
        while todo:
            current = todo.pop()
            if current == ancestor:
                return True
            if current in seen or current not in self.commits:
                continue
            seen.add(current)
            todo.extend(self.commits[current].parents)
        return False

    def ancestors(self, sha: str) -> set[str]:
        """`sha` and every commit reachable from it."""
        todo, seen = [sha], set()
        while todo:
            current = todo.pop()
            if current in seen or current not in self.commits:
                continue
            seen.add(current)
            todo.extend(self.commits[current].parents)
        return seen

    def merge_base(self, one: str, other: str) -> str | None:
        """The best common ancestor of two commits (`git merge-base`): a common ancestor that
        no other common ancestor descends from; None when the histories are unrelated."""
        first, second = self.resolve(one), self.resolve(other)
        if first is None or second is None:
            return None
        common = self.ancestors(first.sha) & self.ancestors(second.sha)
        best = [c for c in common if not any(c in self.ancestors(o) - {o} for o in common)]
        return min(best) if best else None

    def last_commit_for(self, path: str, sha: str) -> str | None:
        """The newest commit reachable from `sha` (first parents) that changed `path`, as
        GitLab's `Gitlab::Git::Commit.last_for_path`; None when `path` does not exist there."""
        commit = self.commits.get(sha)
        if commit is None or path not in commit.files:
            return None
        while commit.parents:
            parent = self.commits[commit.parents[0]]
            same = parent.files.get(path) == commit.files[path]
            if not same or parent.modes.get(path) != commit.modes.get(path):
                return commit.sha
            commit = parent
        return commit.sha


def diff_hunk(old: str, new: str, line: int | None, old_line: int | None) -> str:
    """GitHub's `diff_hunk` of a review comment: the unified-diff hunk holding the commented
    line, cut right after it (GitHub shows the hunk up to the comment)."""
    a, b = old.splitlines(), new.splitlines()
    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(3):
        first, last = group[0], group[-1]
        header = f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@"
        rows: list[tuple[str, int | None, int | None]] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [(" " + a[i1 + k], i1 + k + 1, j1 + k + 1) for k in range(i2 - i1)]
                continue
            rows += [("-" + a[i], i + 1, None) for i in range(i1, i2)]
            rows += [("+" + b[j], None, j + 1) for j in range(j1, j2)]
        for index, (_text, o, n) in enumerate(rows):
            if (line is not None and n == line) or (line is None and o == old_line):
                return "\n".join([header, *(text for text, _, _ in rows[: index + 1])])
    return f"@@ -{old_line or line} +{line or old_line} @@"


def blob_sha(data: bytes) -> str:
    """Git's object id of a blob, as the git data APIs report it."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def listing(
    files: Mapping[str, bytes], modes: Mapping[str, str], prefix: str
) -> dict[str, tuple[str, bytes | None]]:
    """The entries directly under `prefix` ("" or "dir/"): name -> (git mode, the blob, or
    None for a subdirectory)."""
    entries: dict[str, tuple[str, bytes | None]] = {}
    for path, data in sorted(files.items()):
        if not path.startswith(prefix):
            continue
        name, _, rest = path[len(prefix) :].partition("/")
        if rest:
            entries.setdefault(name, ("040000", None))
        else:
            entries[name] = (modes.get(path, REGULAR), data)
    return entries


def tarball(
    prefix: str, files: Mapping[str, bytes], modes: Mapping[str, str] | None = None
) -> bytes:
    """A .tar.gz with every file under `prefix/`, as both forges serve archives (`git archive`):
    executables with mode 0755, symbolic links as link entries whose target is the blob."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(f"{prefix}/{path}")
            mode = (modes or {}).get(path, REGULAR)
            if mode == SYMLINK:
                info.type = tarfile.SYMTYPE
                info.linkname = data.decode("utf-8", "surrogateescape")
                info.mode = 0o777
                tar.addfile(info)
                continue
            info.size = len(data)
            info.mode = 0o755 if mode == EXECUTABLE else 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


class World:
    def __init__(self, clock: Callable[[], datetime] = utcnow) -> None:
        self.lock = threading.RLock()
        self.clock = clock
        self.users: dict[str, SUser] = {}
        self.repos: dict[tuple[str, str], SRepo] = {}
        self._ids = itertools.count(1001)
        # Called after every new comment (API or seeded): the emulator's notifications and to-dos.
        self.comment_hooks: list[Callable[[SRepo, SThread, SComment], None]] = []
        # Called (under the world lock) after a person or the bot changed a thread: the webhook
        # sender turns these into deliveries. (platform, repo path, thread, what, actor login)
        self.listeners: list[Callable[[str, str, SThread, str, str], None]] = []

    def _changed(self, platform: str, path: str, thread: SThread, what: str, actor: str) -> None:
        for listener in self.listeners:
            listener(platform, path, thread, what, actor)

    def changed(self, platform: str, path: str, thread: SThread, what: str, actor: str) -> None:
        """A change an emulator route made itself (GitLab quick actions), for the listeners."""
        with self.lock:
            self._changed(platform, path, thread, what, actor)

    def next_id(self) -> int:
        return next(self._ids)

    # -- seeding ------------------------------------------------------------------------------

    def add_user(self, login: str, token: str | None = None, *, is_bot: bool = False) -> SUser:
        with self.lock:
            user = SUser(login, self.next_id(), token, is_bot)
            self.users[login] = user
            return user

    def user(self, login: str) -> SUser:
        with self.lock:
            return self.users.get(login) or self.add_user(login)

    def user_by_token(self, token: str) -> SUser | None:
        with self.lock:
            return next((u for u in self.users.values() if u.token and u.token == token), None)

    def add_repo(
        self,
        platform: str,
        path: str,
        *,
        files: Mapping[str, bytes | str] | None = None,
        roles: dict[str, str] | None = None,
        default_branch: str = "main",
        empty: bool = False,
        modes: Mapping[str, str] | None = None,
    ) -> SRepo:
        with self.lock:
            owner = self.user(path.split("/")[0])
            repo = SRepo(platform, path, self.next_id(), owner, default_branch)
            content = {p: d.encode() if isinstance(d, str) else d for p, d in (files or {}).items()}
            if not empty:  # an empty repository has no commit and no branch at all
                initial = repo.commit(content, "Initial commit", [], owner.login, modes)
                repo.branches[default_branch] = initial.sha
            repo.roles = {owner.login: "admin", **(roles or {})}
            for login in repo.roles:
                self.user(login)
            self.repos[(platform, path)] = repo
            return repo

    def repo(self, platform: str, path: str) -> SRepo:
        with self.lock:
            return self.repos[(platform, path)]

    def add_thread(
        self,
        platform: str,
        path: str,
        *,
        kind: str = "issue",
        title: str = "An issue",
        body: str = "",
        author: str = "alice",
        labels: list[str] | None = None,
        assignees: list[str] | None = None,
        head_ref: str = "feature",
        labelled_by: str | None = None,
    ) -> SThread:
        with self.lock:
            repo = self.repo(platform, path)
            number = self._next_number(repo, kind)
            now = self.clock()
            thread = SThread(
                number=number,
                kind=kind,
                id=self.next_id(),
                title=title,
                body=body,
                author=self.user(author),
                created_at=now,
                updated_at=now,
                labels=list(labels or []),
                assignees=[self.user(a) for a in assignees or []],
                head_ref=head_ref if kind != "issue" else "",
                base_ref=repo.default_branch,
            )
            if kind != "issue":
                repo.branches.setdefault(head_ref, repo.branches[repo.default_branch])
                thread.head_sha = repo.branch_sha(head_ref)
            repo.threads[(kind, number)] = thread
            # Labels and assignees need triage (GitHub) / Reporter (GitLab) rights: the author
            # set them when filing if allowed to, else the labels were set by the repository's
            # owner (a thread filed by a reader gets them from someone who triages).
            who = self.user(labelled_by) if labelled_by else self._triager(repo, thread.author)
            for label in thread.labels:
                self._event(thread, "labeled", label, who, now)
            for assignee in thread.assignees:
                self._event(thread, "assigned", assignee.login, who, now)
                if platform == "gitlab":
                    note = SComment(self.next_id(), who, f"assigned to @{assignee.login}", now, now)
                    note.system = True
                    thread.comments.append(note)
            return thread

    @staticmethod
    def _triager(repo: SRepo, author: SUser) -> SUser:
        role = repo.roles.get(author.login, "none")
        allowed = role in ROLES and ROLES.index(role) >= ROLES.index("triage")
        return author if allowed else repo.owner

    def _event(self, thread: SThread, kind: str, name: str, actor: SUser, at: datetime) -> None:
        thread.events.append(SEvent(self.next_id(), kind, name, actor, at))

    def record_event(self, thread: SThread, kind: str, name: str, actor: SUser) -> None:
        """For changes made outside `set_labels`/`assign` (GitLab quick actions)."""
        with self.lock:
            self._event(thread, kind, name, actor, thread.updated_at)

    def _next_number(self, repo: SRepo, kind: str) -> int:
        # GitHub issues and pull requests share one sequence; GitLab keeps one per kind.
        same = [n for (k, n) in repo.threads if repo.platform == "github" or k == kind]
        return max(same, default=0) + 1

    def add_comment(
        self,
        platform: str,
        path: str,
        number: int,
        body: str,
        *,
        author: str = "alice",
        kind: str | None = None,
        system: bool = False,
        review: bool = False,
    ) -> SComment:
        with self.lock:
            thread = self.thread(platform, path, number, kind)
            now = self.clock()
            comment = SComment(self.next_id(), self.user(author), body, now, now, system, review)
            thread.comments.append(comment)
            thread.updated_at = now
            for hook in self.comment_hooks:
                hook(self.repo(platform, path), thread, comment)
            if not system:
                self._changed(platform, path, thread, "comment", author)
            return comment

    def add_review_comment(
        self,
        platform: str,
        path: str,
        number: int,
        body: str,
        *,
        file: str,
        line: int | None = None,
        old_line: int | None = None,
        author: str = "alice",
        review_id: int | None = None,
    ) -> SComment:
        """A comment on a line of a pull/merge request's diff (GitHub review comment, GitLab
        DiffNote), with the hunk computed from the base and head files."""
        with self.lock:
            repo = self.repo(platform, path)
            thread = self.thread(platform, path, number, "pull" if platform == "github" else "mr")
            old = (repo.files(thread.base_ref) or {}).get(file, b"").decode(errors="replace")
            new = (repo.files(thread.head_sha) or {}).get(file, b"").decode(errors="replace")
            hunk = diff_hunk(old, new, line, old_line)
            comment = self.add_comment(
                platform, path, number, body, author=author, kind=thread.kind, review=True
            )
            comment.position = SPosition(file, line, old_line, hunk, thread.head_sha)
            comment.review_id = review_id
            return comment

    def add_review(
        self,
        path: str,
        number: int,
        body: str,
        *,
        state: str = "CHANGES_REQUESTED",
        author: str = "alice",
        comments: list[tuple[str, int, str]] | None = None,
    ) -> SReview:
        """A GitHub review submitted with its text, verdict and (file, line, text) comments."""
        with self.lock:
            thread = self.thread("github", path, number, "pull")
            review_id = self.next_id()
            for file, line, text in comments or []:
                self.add_review_comment(
                    "github",
                    path,
                    number,
                    text,
                    file=file,
                    line=line,
                    author=author,
                    review_id=review_id,
                )
            now = self.clock()
            review = SReview(review_id, self.user(author), body, state, now, thread.head_sha)
            thread.reviews.append(review)
            thread.updated_at = now
            return review

    def reply(
        self,
        platform: str,
        path: str,
        number: int,
        target: int,
        body: str,
        *,
        author: str = "alice",
        kind: str | None = None,
    ) -> SComment:
        """A reply in the review thread (GitHub) or discussion (GitLab) of comment `target`."""
        with self.lock:
            thread = self.thread(platform, path, number, kind)
            parent = next(c for c in thread.comments if c.id == target)
            comment = self.add_comment(
                platform, path, number, body, author=author, kind=thread.kind, review=parent.review
            )
            comment.position = parent.position
            comment.in_reply_to = parent.in_reply_to or parent.id
            comment.discussion = self.discussion_of(parent)
            # GitLab keeps one confidentiality per discussion: a reply to an internal note is
            # internal too (Notes::BuildService, see gitlab-org/gitlab!246254).
            comment.internal = parent.internal
            return comment

    def discussion_of(self, comment: SComment) -> str:
        """GitLab discussion ids are 40 hex characters; a note starts its own unless a reply."""
        if not comment.discussion:
            comment.discussion = hashlib.sha1(f"discussion-{comment.id}".encode()).hexdigest()
        return comment.discussion

    def add_internal_note(
        self, path: str, number: int, body: str, *, author: str = "alice", kind: str | None = None
    ) -> SComment:
        """A GitLab internal note: readable only by project members (Reporter and up)."""
        with self.lock:
            comment = self.add_comment("gitlab", path, number, body, author=author, kind=kind)
            comment.internal = True
            return comment

    def edit_comment(self, comment_id: int, body: str) -> SComment:
        with self.lock:
            for thread in self.all_threads():
                for comment in thread.comments:
                    if comment.id == comment_id:
                        comment.body = body
                        comment.updated_at = self.clock()
                        thread.updated_at = comment.updated_at
                        return comment
            raise KeyError(comment_id)

    def delete_comment(self, comment_id: int) -> None:
        with self.lock:
            for thread in self.all_threads():
                thread.comments = [c for c in thread.comments if c.id != comment_id]

    def delete_thread(self, platform: str, path: str, number: int, kind: str) -> None:
        """An admin deletes the thread: it is gone from every listing and every route."""
        with self.lock:
            repo = self.repo(platform, path)
            del repo.threads[(kind, number)]
            repo.deleted.add((kind, number))

    def set_labels(
        self,
        platform: str,
        path: str,
        number: int,
        labels: list[str],
        kind: str | None = None,
        actor: str = "alice",
    ) -> None:
        """Set the labels as `actor` did (a writer by default); each change is an event."""
        with self.lock:
            thread = self.thread(platform, path, number, kind)
            before, after = list(thread.labels), list(dict.fromkeys(labels))
            thread.labels = after
            thread.updated_at = self.clock()
            who = self.user(actor)
            for label in after:
                if label not in before:
                    self._event(thread, "labeled", label, who, thread.updated_at)
            for label in before:
                if label not in after:
                    self._event(thread, "unlabeled", label, who, thread.updated_at)
            if before != after:
                self._changed(platform, path, thread, "labels", actor)

    def assign(
        self,
        platform: str,
        path: str,
        number: int,
        login: str,
        actor: str = "alice",
        kind: str | None = None,
    ) -> None:
        """`actor` assigns `login`. GitLab has no assignee events API: like GitLab, the
        emulator records a system note "assigned to @login" written by the actor."""
        with self.lock:
            thread = self.thread(platform, path, number, kind)
            user, who = self.user(login), self.user(actor)
            if user not in thread.assignees:
                thread.assignees.append(user)
            thread.updated_at = self.clock()
            self._event(thread, "assigned", login, who, thread.updated_at)
            self._changed(platform, path, thread, "assigned", actor)
            if platform == "gitlab":
                self.add_comment(
                    platform,
                    path,
                    number,
                    f"assigned to @{login}",
                    author=actor,
                    kind=thread.kind,
                    system=True,
                )

    def set_state(
        self, platform: str, path: str, number: int, state: str, kind: str | None = None
    ) -> None:
        with self.lock:
            thread = self.thread(platform, path, number, kind)
            thread.state = state
            thread.updated_at = self.clock()
            self._changed(platform, path, thread, "state", thread.author.login)

    def push(
        self,
        platform: str,
        path: str,
        branch: str,
        files: Mapping[str, bytes | str],
        message: str,
        modes: Mapping[str, str] | None = None,
    ) -> str:
        """A person pushes a commit changing `files` (and `modes`) on `branch` (created from the
        default). Tests call it between the bot's reads and writes to race it."""
        with self.lock:
            repo = self.repo(platform, path)
            base = repo.branches.get(branch) or repo.branches[repo.default_branch]
            content = dict(repo.commits[base].files)
            content.update({p: d.encode() if isinstance(d, str) else d for p, d in files.items()})
            merged = {**repo.commits[base].modes, **(modes or {})}
            commit = repo.commit(content, message, [base], "alice", merged)
            repo.branches[branch] = commit.sha
            self.head_moved(repo, branch)
            return commit.sha

    def open_change_request(
        self, platform: str, path: str, author: str, change: SChangeRequest
    ) -> SThread:
        with self.lock:
            repo = self.repo(platform, path)
            kind = "pull" if platform == "github" else "mr"
            thread = self.add_thread(
                platform,
                path,
                kind=kind,
                title=change.title,
                body=change.body,
                author=author,
                head_ref=change.head,
            )
            thread.base_ref = change.base
            thread.change = change
            thread.head_sha = repo.branches[change.head]
            return thread

    def fork(self, platform: str, path: str, owner: str) -> SRepo:
        """`owner`'s fork of `path` (made on first use): its own repository, with its own
        branches and roles, sharing the parent's object store."""
        with self.lock:
            parent = self.repo(platform, path)
            fork_path = f"{owner}/{path.split('/', 1)[1]}"
            existing = self.repos.get((platform, fork_path))
            if existing is not None:
                return existing
            fork = SRepo(platform, fork_path, self.next_id(), self.user(owner))
            fork.commits, fork.trees, fork.tree_modes = (
                parent.commits,
                parent.trees,
                parent.tree_modes,
            )
            fork.default_branch = parent.default_branch
            fork.branches = {parent.default_branch: parent.branches[parent.default_branch]}
            fork.roles = {owner: "admin"}
            fork.fork_of = path
            self.repos[(platform, fork_path)] = fork
            return fork

    def add_fork_request(
        self,
        platform: str,
        path: str,
        *,
        author: str,
        files: Mapping[str, bytes | str],
        title: str = "A change",
        body: str = "",
        labels: list[str] | None = None,
        maintainer_can_modify: bool = False,
        branch: str = "patch-1",
    ) -> SThread:
        """A pull/merge request from `branch` of `author`'s fork. Its head commit is reachable
        in the base repository by sha, as both forges keep a request's head there (GitHub
        `refs/pull/<n>/head`: docs.github.com, "Checking out pull requests locally"; GitLab
        `refs/merge-requests/<iid>/head`: docs.gitlab.com, "Merge requests > Checkout
        locally"), but no branch of the base repository points at it."""
        with self.lock:
            repo = self.repo(platform, path)
            fork = self.fork(platform, path, author)
            base = repo.branches[repo.default_branch]
            content = dict(repo.commits[base].files)
            content.update({p: d.encode() if isinstance(d, str) else d for p, d in files.items()})
            commit = repo.commit(content, title, [base], author)
            fork.branches[branch] = commit.sha
            kind = "pull" if platform == "github" else "mr"
            thread = self.add_thread(
                platform, path, kind=kind, title=title, body=body, author=author, labels=labels
            )
            repo.branches.pop(thread.head_ref, None)  # add_thread made one in the base repo
            thread.head_ref = branch
            thread.head_sha = commit.sha
            thread.head_repo = fork.path
            thread.head_repo_id = fork.id
            thread.maintainer_can_modify = maintainer_can_modify
            return thread

    def head_moved(self, repo: SRepo, branch: str) -> None:
        """A branch of `repo` moved: every open request whose head it is follows it (a fork's
        request lives in the parent; both forges update the request's head on a push)."""
        with self.lock:
            sha = repo.branches.get(branch)
            for owner in self.repos.values():
                for thread in owner.threads.values():
                    source = thread.head_repo or owner.path
                    if source == repo.path and thread.head_ref == branch and sha is not None:
                        thread.head_sha = sha

    def may_push(self, repo: SRepo, branch: str, login: str) -> bool:
        """Whether `login` may push to `branch` of `repo`. Only forks are checked (elsewhere
        the sandbox lets the token's user write, as the tests configure it): the fork's own
        people, or someone with write access to the parent when an open request from that
        branch allows edits by maintainers ("Allowing changes to a pull request branch created
        from a fork", docs.github.com/en/pull-requests/collaborating-with-pull-requests/
        working-with-forks/allowing-changes-to-a-pull-request-branch-created-from-a-fork;
        GitLab: "Allow commits from members who can merge to the target branch",
        docs.gitlab.com/user/project/merge_requests/allow_collaboration/)."""
        with self.lock:
            if repo.fork_of is None:
                return True
            if _level(repo.roles.get(login)) >= _level("write"):
                return True
            parent = self.repos.get((repo.platform, repo.fork_of))
            if parent is None:
                return False
            if _level(parent.roles.get(login)) < _level("write"):
                return False
            return any(
                t.head_repo == repo.path
                and t.head_ref == branch
                and t.state == "open"
                and t.maintainer_can_modify
                for t in parent.threads.values()
            )

    def thread(self, platform: str, path: str, number: int, kind: str | None = None) -> SThread:
        with self.lock:
            repo = self.repo(platform, path)
            kinds = [kind] if kind else ["issue", "pull", "mr"]
            for candidate in kinds:
                found = repo.thread(candidate, number)
                if found is not None:
                    return found
            raise KeyError(f"{platform}:{path} {kinds} {number}")

    def all_threads(self) -> list[SThread]:
        with self.lock:
            return [t for repo in self.repos.values() for t in repo.threads.values()]
