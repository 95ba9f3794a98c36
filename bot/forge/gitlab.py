"""GitLab adapter on python-gitlab.

python-gitlab sleeps and retries on 429 by default and has no timeout; both are switched off
here (`RequestPolicy` decides) and a timeout is always set. Discovery is incremental: after the
first full scan, one `updated_after` query per kind returns only what changed, and the cached
candidate set is updated from it (so a removed label is noticed too).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import gitlab
import requests
from gitlab.exceptions import GitlabAuthenticationError, GitlabError

from bot.core.clock import SYSTEM_CLOCK, format_time, parse_time
from bot.core.log import get_logger
from bot.forge import gitlab_discovery
from bot.forge._util import LRU, TTLCache, clean_text
from bot.forge.errors import (
    ALL_BUCKETS,
    AuthError,
    BranchMoved,
    Forbidden,
    ForgeError,
    NotFound,
    RateLimited,
    TransientError,
)
from bot.forge.inbox import Cursors, MentionBatch, always
from bot.forge.mentions import calls_bot
from bot.forge.pacing import WindowPacer
from bot.forge.policy import RequestPolicy
from bot.forge.quick_actions import neutralise_payload
from bot.forge.ratelimits import Buckets, until_reset
from bot.model.git import BranchHead, ChangedPaths, ChangeRequest, FileChange, TreeEntry
from bot.model.thread import (
    Comment,
    ControlEvent,
    Kind,
    Permission,
    Platform,
    ReviewPosition,
    TaskKey,
    TaskSummary,
    Thread,
    User,
)

_ACCESS = [
    (50, Permission.ADMIN),
    (40, Permission.MAINTAIN),
    (30, Permission.WRITE),
    (20, Permission.TRIAGE),
    (1, Permission.READ),
]
log = get_logger(__name__)
# Notes that sit in a thread: on a diff line, or a reply ("Start a thread").
_THREADED = ("DiffNote", "DiscussionNote")
# Endpoints with a limit of their own, by operation: GitLab's names for them (archives and
# notes: lib/gitlab/application_rate_limiter.rb; the files API's throttle: docs.gitlab.com/
# administration/settings/files_api_rate_limits). Everything else spends the API's limit.
GENERAL_BUCKET = "api"
_BUCKETS = {
    "archive": "project_repositories_archive",
    "post_comment": "notes_create",
    "read_file": "throttle_authenticated_files_api",
    "file": "throttle_authenticated_files_api",
}
_BOT_NAME = re.compile(r"^(project|group)_\d+_bot(_[0-9a-f]+)?$")
# System notes GitLab writes on assignment: "assigned to @a and @b" (with "and unassigned ...").
_ASSIGNED = re.compile(r"^assigned to ((?:@[\w.\-]+(?:,\s*|\s+and\s+)?)+)")
_MENTION = re.compile(r"@([\w.\-]+)")
# Our clock and GitLab's may disagree; the first incremental query overlaps by this much.
CLOCK_SKEW = timedelta(minutes=5)
DEFAULT_RATE_LIMIT_WAIT = 60.0
RESET_MARGIN = 0.5
LABEL_COLOR = "#ededed"
COMPARE_FILES = 1000  # GitLab's default "Maximum diff files" of a comparison
# GitLab's 400s for a commit that lost a race (Files::MultiService, Gitlab::Git::Index and
# Commits::CreateService#validate_branch_existence!): read the branch again and retry.
_MOVED = (
    "has changed since you started editing it",
    "A file with this name already exists",
    "A file with this name doesn't exist",
    "already exists. Switch to that branch",
)


class _Client(gitlab.Gitlab):
    """python-gitlab with its sleeping retry loop off; remembers the last error headers."""

    _local = threading.local()

    def http_request(self, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs["obey_rate_limit"] = False
        kwargs["retry_transient_errors"] = False
        kwargs["max_retries"] = 0
        _Client._local.headers = {}
        # Every write passes here: no note or description can carry a live quick action.
        if "post_data" in kwargs:
            kwargs["post_data"] = neutralise_payload(kwargs["post_data"])
        elif len(args) > 3:
            args = (*args[:3], neutralise_payload(args[3]), *args[4:])
        return super().http_request(*args, **kwargs)

    @staticmethod
    def record(response: requests.Response, *args: Any, **kwargs: Any) -> None:
        if response.status_code >= 400:
            _Client._local.headers = {k.lower(): v for k, v in response.headers.items()}

    @staticmethod
    def last_error_headers() -> dict[str, str]:
        headers: dict[str, str] = getattr(_Client._local, "headers", {})
        return headers


class _ProjectScan:
    """Candidate threads of one project, kept current with `updated_after` queries."""

    def __init__(self) -> None:
        self.found: dict[TaskKey, TaskSummary] = {}
        self.high_water: datetime | None = None


class GitLabForge:
    platform = Platform.GITLAB
    # An idle cycle across projects costs 18 requests (12 label listings, 2 assigned, 2 changed,
    # 2 to-do lists) per group; project by project, 2 per project (+2): across from 9 on.
    cross_repo_from = 9

    def __init__(
        self,
        url: str,
        token: str,
        *,
        watch_labels: Sequence[str],
        watch_assigned: bool = True,
        timeout: float = 30.0,
        policy: RequestPolicy | None = None,
        wall_clock: Callable[[], float] = SYSTEM_CLOCK.time,
        permission_ttl: float = 600.0,
        archives_per_minute: int | None = 5,
        archive_window: float = 60.0,
    ) -> None:
        self._buckets = Buckets()
        session = requests.Session()
        session.hooks["response"].append(_Client.record)
        session.hooks["response"].append(self._note_limits)
        self._gl = _Client(
            url.rstrip("/"), private_token=token, timeout=timeout, per_page=100, session=session
        )
        self._policy = policy or RequestPolicy(host=url)
        self._archive_pacer = WindowPacer(
            archives_per_minute, archive_window, stop=self._policy.stop
        )
        self._translate: Callable[[Exception], ForgeError] = partial(_translate, clock=wall_clock)
        self._wall_clock = wall_clock
        self._watch_labels = tuple(watch_labels)
        self._watch_assigned = watch_assigned
        self._scans: dict[str, _ProjectScan] = {}
        self._permissions: TTLCache[tuple[str, str], Permission] = TTLCache(permission_ttl)
        self._user_ids: TTLCache[str, int] = TTLCache(permission_ttl * 6)
        self._project_paths: TTLCache[int, str] = TTLCache(permission_ttl)  # forks, by id
        # note id -> (task, discussion id, first note id): notes keep their discussion for life.
        self._threads: LRU[str, tuple[str, str, str]] = LRU(65536)
        self._me: User | None = None
        self._labels_ready: set[tuple[str, str]] = set()
        # Open unlabelled threads that changed since the last look, and since when.
        self._changed: dict[TaskKey, tuple[TaskSummary, datetime]] = {}
        self._group_high_water: dict[str, datetime] = {}
        self._checked: LRU[TaskKey, datetime] = LRU(4096)  # thread -> updated_at read
        # To-Do items found to start a task not recorded yet: not checked again while they wait.
        self._todo_found: LRU[str, TaskSummary] = LRU(4096)

    def _call(self, operation: str, fn: Callable[[], Any], *, idempotent: bool = True) -> Any:
        bucket = _BUCKETS.get(operation, GENERAL_BUCKET)
        return self._policy.call(
            operation, fn, self._translate, idempotent=idempotent, bucket=bucket
        )

    def rate_limits(self) -> dict[str, int]:
        """Requests left per throttle (`RateLimit-Name`; "api" when unnamed), as last told."""
        return self._buckets.remaining()

    def _note_limits(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        remaining = response.headers.get("RateLimit-Remaining", "")
        if remaining:
            self._buckets.record(response.headers.get("RateLimit-Name") or "api", remaining)

    # -- identity and discovery -------------------------------------------------------------

    def whoami(self) -> User:
        if self._me is None:

            def fetch() -> dict[str, Any]:
                self._gl.auth()
                assert self._gl.user is not None
                return dict(self._gl.user.attributes)

            data = self._call("whoami", fetch)
            self._me = User(data["username"], int(data["id"]), bool(data.get("bot")))
        return self._me

    def list_tasks(self, repo: str) -> list[TaskSummary]:
        scan = self._scans.setdefault(repo, _ProjectScan())
        if scan.high_water is None:
            started = datetime.fromtimestamp(self._wall_clock(), UTC) - CLOCK_SKEW
            scan.found = self._full_scan(repo)
            scan.high_water = started
        else:
            self._incremental_scan(repo, scan)
        return sorted(scan.found.values(), key=lambda s: s.key)

    def list_tasks_across(self, repos: Sequence[str]) -> tuple[list[TaskSummary], list[str]]:
        """Candidates in all of `repos` through group listings (cost per group, not per
        project); the projects they could not cover, to be listed one by one."""
        found, uncovered = gitlab_discovery.list_across(
            self._gl, self._call, _summary, repos, self._watch_labels, self._watch_assigned
        )
        self._note_changed_in_groups(repos, uncovered, {t.key for t in found})
        return found, uncovered

    def _note_changed_in_groups(
        self, repos: Sequence[str], uncovered: Sequence[str], labelled: set[TaskKey]
    ) -> None:
        """Open threads changed since the last cycle, per group (two requests a group): those
        without a label may hold a `/bot` from a writer."""
        now = datetime.fromtimestamp(self._wall_clock(), UTC) - CLOCK_SKEW
        skip = {r.lower() for r in uncovered}
        for group in sorted({r.split("/")[0] for r in repos if r.lower() not in skip}):
            since = self._group_high_water.get(group)
            if since is not None:
                changed = gitlab_discovery.changed_in_group(
                    self._gl, self._call, _summary, group, repos, format_time(since)
                )
                for item in changed:
                    if item.key not in labelled:
                        self._changed[item.key] = (item, since)
            self._group_high_water[group] = now

    def mentioned_tasks(self, repos: Sequence[str]) -> list[TaskSummary]:
        """Open threads of `repos` where a writer called the bot, settled at once (a caller
        without a store; the daemon uses `mention_batch`)."""
        batch = self.mention_batch(repos)
        batch.commit(always)
        return batch.tasks

    def mention_batch(self, repos: Sequence[str], cursors: Cursors | None = None) -> MentionBatch:
        """Open threads of `repos` where a writer called the bot: its To-Do items (mentions),
        and the unlabelled threads that changed with a writer's `/bot` among the new notes.
        No To-Do item is marked done before `commit` (the pending ones are the cursor: no
        other is kept)."""
        checked = gitlab_discovery.read_todos(
            self._gl, self._call, _summary, self.permission, repos, self._todo_found
        )
        found = {c.summary.key: c.summary for c in checked if c.summary is not None}
        found.update(self._changed_with_command(set(found)))
        commit = partial(gitlab_discovery.settle_todos, self._gl, self._call, checked)
        return MentionBatch(sorted(found.values(), key=lambda s: s.key), commit)

    def mention_todos(self, key: TaskKey) -> list[str]:
        """The pending mention To-Do items of one thread (a webhook named it)."""
        return gitlab_discovery.thread_todos(self._gl, self._call, key)

    def todos_done(self, ids: Sequence[str]) -> None:
        for ident in ids:
            gitlab_discovery.mark_done(self._gl, self._call, ident)

    def _changed_with_command(self, known: set[TaskKey]) -> dict[TaskKey, TaskSummary]:
        """The changed unlabelled threads with a writer's `/bot` (or mention) in the new notes.
        A thread whose notes could not be read stays for the next cycle (a rate limit: every
        one left)."""
        changed, self._changed = self._changed, {}
        me = self.whoami().login
        found: dict[TaskKey, TaskSummary] = {}
        waiting = list(changed.items())
        for index, (key, (item, since)) in enumerate(waiting):
            if self._checked.get(key) == item.updated_at:
                continue  # listed again (the listings overlap): its notes were read
            if key in known:  # a To-Do item found it already
                self._checked.put(key, item.updated_at)
                continue
            try:
                notes = self.list_comments(key, since=since)
            except AuthError:
                raise
            except ForgeError as exc:
                log.warning(
                    "mention_check_failed",
                    platform="gitlab",
                    task=str(key),
                    error=str(exc),
                    status=exc.status,
                )
                left = waiting[index:] if isinstance(exc, RateLimited) else [(key, (item, since))]
                for again, value in left:
                    self._changed.setdefault(again, value)
                if isinstance(exc, RateLimited):
                    break
                continue
            self._checked.put(key, item.updated_at)
            if any(
                c.permission.can_write and not c.author_is_bot and calls_bot(c.body, me)
                for c in notes
            ):
                found[key] = replace(item, mentioned=True)
        return found

    def _full_scan(self, repo: str) -> dict[TaskKey, TaskSummary]:
        queries: list[dict[str, Any]] = [{"labels": label} for label in self._watch_labels]
        if self._watch_assigned:
            queries.append({"assignee_username": self.whoami().login})
        found: dict[TaskKey, TaskSummary] = {}
        for query in queries:
            for item in self._list_threads(repo, state="opened", **query):
                found[item.key] = item
        return found

    def _incremental_scan(self, repo: str, scan: _ProjectScan) -> None:
        assert scan.high_water is not None
        changed = self._list_threads(
            repo, state="all", updated_after=format_time(scan.high_water), order_by="updated_at"
        )
        since = scan.high_water
        for item in changed:
            if self._matches(item):
                scan.found[item.key] = item
            else:
                scan.found.pop(item.key, None)
                if item.is_open:  # may hold a `/bot` from a writer: mentioned_tasks looks
                    self._changed[item.key] = (item, since)
            scan.high_water = max(scan.high_water, item.updated_at)

    def _matches(self, item: TaskSummary) -> bool:
        if not item.is_open:
            return False
        if item.labels & set(self._watch_labels):
            return True
        return self._watch_assigned and self.whoami().login in item.assignees

    def _list_threads(self, repo: str, **query: Any) -> list[TaskSummary]:
        project = self._gl.projects.get(repo, lazy=True)
        out: list[TaskSummary] = []
        for manager, kind in (
            (project.issues, Kind.ISSUE),
            (project.mergerequests, Kind.MERGE_REQUEST),
        ):
            items = self._call("list", partial(manager.list, get_all=True, **query))
            out.extend(_summary(repo, kind, dict(i.attributes)) for i in items)
        return out

    # -- threads and comments -----------------------------------------------------------------

    def _thread_manager(self, key: TaskKey) -> Any:
        project = self._gl.projects.get(key.repo, lazy=True)
        return project.mergerequests if key.kind is Kind.MERGE_REQUEST else project.issues

    def get_thread(self, key: TaskKey) -> Thread:
        manager = self._thread_manager(key)
        data = dict(self._call("get_thread", partial(manager.get, key.number)).attributes)
        return Thread(
            key=key,
            title=clean_text(data["title"]),
            body=clean_text(data.get("description")),
            author=(data.get("author") or {}).get("username", ""),
            state="open" if data["state"] == "opened" else data["state"],
            labels=frozenset(data.get("labels") or []),
            assignees=frozenset(a["username"] for a in data.get("assignees") or []),
            created_at=parse_time(data["created_at"]),
            updated_at=parse_time(data["updated_at"]),
            web_url=data.get("web_url", ""),
            head_ref=data.get("source_branch"),
            head_sha=data.get("sha"),
            base_ref=data.get("target_branch"),
            head_repo=self._source_project(key.repo, data),
            # "Allow commits from members who can merge to the target branch"
            # (https://docs.gitlab.com/api/merge_requests/#get-single-mr: allow_collaboration).
            maintainer_can_modify=bool(data.get("allow_collaboration")),
        )

    def _source_project(self, repo: str, data: dict[str, Any]) -> str | None:
        """The path of a merge request's source project: `repo` itself, a fork's path (looked
        up by id, cached), or None (an issue, or a fork that is gone)."""
        source = data.get("source_project_id")
        if source is None:
            return None
        if source == data.get("target_project_id"):
            return repo
        cached = self._project_paths.get(int(source))
        if cached is not None:
            return cached
        try:
            found = self._call("project", partial(self._gl.projects.get, int(source)))
        except NotFound:
            return None
        path = str(found.attributes["path_with_namespace"])
        self._project_paths.put(int(source), path)
        return path

    def list_comments(self, key: TaskKey, since: datetime | None = None) -> list[Comment]:
        notes = self._thread_manager(key).get(key.number, lazy=True).notes

        def fetch() -> list[dict[str, Any]]:
            # Newest-updated first, stopping at `since`: an unchanged thread costs one request.
            collected = []
            for note in notes.list(sort="desc", order_by="updated_at", per_page=100, iterator=True):
                data = dict(note.attributes)
                if since is not None and parse_time(data["updated_at"]) < since:
                    break
                collected.append(data)
            return collected

        raw = [n for n in self._call("list_comments", fetch) if not n.get("system")]
        if any(n.get("type") in _THREADED and self._threads.get(str(n["id"])) is None for n in raw):
            self._learn_threads(key)
        comments = [self._comment(key.repo, n) for n in raw]
        return sorted(comments, key=lambda c: (c.created_at, c.id))

    def control_events(self, key: TaskKey) -> list[ControlEvent]:
        # Labels: https://docs.gitlab.com/api/resource_label_events/ . Assignment has no
        # events API; GitLab writes a system note "assigned to @user" by whoever did it.
        thread = self._thread_manager(key).get(key.number, lazy=True)
        labels = self._call("label_events", partial(thread.resourcelabelevents.list, get_all=True))
        events = []
        for raw in labels:
            data = dict(raw.attributes)
            kind = "labeled" if data.get("action") == "add" else "unlabeled"
            name = (data.get("label") or {}).get("name", "")
            actor = (data.get("user") or {}).get("username", "")
            at = parse_time(data.get("created_at"))
            events.append(ControlEvent(kind, name, actor, at, f"label:{data['id']}"))
        notes = self._call("notes", partial(thread.notes.list, get_all=True))
        for raw in notes:
            data = dict(raw.attributes)
            match = _ASSIGNED.match(str(data.get("body") or "")) if data.get("system") else None
            if match is None:
                continue
            actor = (data.get("author") or {}).get("username", "")
            at = parse_time(data.get("created_at"))
            for login in _MENTION.findall(match.group(1)):
                events.append(ControlEvent("assigned", login, actor, at, f"note:{data['id']}"))
        return sorted(events, key=lambda e: e.at)

    def _learn_threads(self, key: TaskKey) -> None:
        """Which discussion each note is in: the notes listing does not say, and a reply needs
        it. Read only when a threaded note not seen before arrives.
        https://docs.gitlab.com/ee/api/discussions.html"""
        discussions = self._thread_manager(key).get(key.number, lazy=True).discussions
        for item in self._call("discussions", partial(discussions.list, get_all=True)):
            notes = item.attributes.get("notes") or []
            for note in notes:
                where = (str(key), str(item.id), str(notes[0]["id"]))
                self._threads.put(str(note["id"]), where)

    def _thread_of(self, key: TaskKey, note_id: str) -> tuple[str, str, str] | None:
        """The discussion of note `note_id` in this thread (None for a note elsewhere)."""
        thread = self._threads.get(note_id)
        if thread is None:
            self._learn_threads(key)
            thread = self._threads.get(note_id)
        return thread if thread is not None and thread[0] == str(key) else None

    def post_comment(self, key: TaskKey, body: str, reply_to: str | None = None) -> Comment:
        parent = self._thread_manager(key).get(key.number, lazy=True)
        notes = parent.notes
        thread = self._thread_of(key, reply_to) if reply_to and reply_to.isdigit() else None
        if thread is not None:
            # "Add note to existing ... thread": POST .../discussions/:discussion_id/notes
            notes = parent.discussions.get(thread[1], lazy=True).notes
        note = self._call("post_comment", partial(notes.create, {"body": body}), idempotent=False)
        data = dict(note.attributes)
        if thread is not None:
            self._threads.put(str(data["id"]), thread)
        return self._comment(key.repo, data)

    def edit_comment(self, key: TaskKey, comment_id: str, body: str) -> Comment:
        notes = self._thread_manager(key).get(key.number, lazy=True).notes
        data = self._call("edit_comment", partial(notes.update, int(comment_id), {"body": body}))
        return self._comment(key.repo, dict(data))

    def add_labels(self, key: TaskKey, labels: Sequence[str]) -> None:
        if labels:
            self._ensure_labels(key.repo, labels)
            self._update_labels(key, {"add_labels": ",".join(labels)})

    def remove_labels(self, key: TaskKey, labels: Sequence[str]) -> None:
        if labels:
            self._update_labels(key, {"remove_labels": ",".join(labels)})

    def _ensure_labels(self, repo: str, labels: Sequence[str]) -> None:
        """Create each label in the project the first time it is used; 409 `Label already
        exists` is fine (docs.gitlab.com/api/labels, "Create a new label")."""
        manager = self._gl.projects.get(repo, lazy=True).labels
        for name in labels:
            if (repo, name) in self._labels_ready:
                continue

            def create(name: str = name) -> None:
                try:
                    manager.create({"name": name, "color": LABEL_COLOR})
                except GitlabError as exc:
                    if exc.response_code not in (403, 409):  # 403: may not create; adding may work
                        raise

            self._call("create_label", create, idempotent=False)
            self._labels_ready.add((repo, name))

    def _update_labels(self, key: TaskKey, change: dict[str, str]) -> None:
        manager = self._thread_manager(key)
        self._call("update_labels", partial(manager.update, key.number, change))

    # -- repository ---------------------------------------------------------------------------

    def permission(self, repo: str, login: str) -> Permission:
        cached = self._permissions.get((repo, login))
        if cached is not None:
            return cached
        permission = Permission.NONE
        user_id = self._user_id(login)
        if user_id is not None:
            members = self._gl.projects.get(repo, lazy=True).members_all
            try:
                member = self._call("permission", partial(members.get, user_id))
                permission = _level(int(member.attributes.get("access_level", 0)))
            except NotFound:
                permission = Permission.NONE
        self._permissions.put((repo, login), permission)
        return permission

    def _user_id(self, login: str) -> int | None:
        cached = self._user_ids.get(login)
        if cached is not None:
            return cached
        users = self._call("user_lookup", partial(self._gl.users.list, username=login))
        if not users:
            return None
        user_id = int(users[0].attributes["id"])
        self._user_ids.put(login, user_id)
        return user_id

    def default_branch(self, repo: str) -> str:
        project = self._call("project", partial(self._gl.projects.get, repo))
        return str(project.attributes["default_branch"])

    def read_file(self, repo: str, path: str, ref: str) -> bytes:
        files = self._gl.projects.get(repo, lazy=True).files
        data = self._call("read_file", partial(files.raw, file_path=path, ref=ref))
        return bytes(data)

    # -- publishing ----------------------------------------------------------------------------

    def resolve_branch(self, repo: str, branch: str) -> BranchHead | None:
        branches = self._gl.projects.get(repo, lazy=True).branches
        try:
            found = self._call("branch", partial(branches.get, branch))
        except NotFound:
            return None
        commit = found.attributes["commit"]
        return BranchHead(str(commit["id"]), str(commit.get("message") or ""))

    def changed_paths(self, repo: str, base: str, head: str) -> ChangedPaths:
        """ "Compare branches, tags or commits" from the merge base (`straight=false`). Its
        diffs are cut at the instance's "Maximum diff files" (default 1,000,
        https://docs.gitlab.com/administration/diff_limits/): a list that long may be cut.
        https://docs.gitlab.com/api/repositories/#compare-branches-tags-or-commits"""
        project = self._gl.projects.get(repo, lazy=True)
        fetch = partial(project.repository_compare, base, head, straight="false")
        data = self._call("compare", fetch)
        diffs = data.get("diffs") or []
        paths = {str(d[k]) for d in diffs for k in ("old_path", "new_path") if d.get(k)}
        complete = len(diffs) < COMPARE_FILES and not data.get("compare_timeout")
        ancestor = not (data.get("commits") or [])
        return ChangedPaths(frozenset(paths), complete, ancestor)

    def tree_entries(self, repo: str, ref: str, paths: Sequence[str]) -> dict[str, TreeEntry]:
        """One "List repository tree" per folder holding one of `paths`.
        https://docs.gitlab.com/api/repositories/#list-repository-tree"""
        project = self._gl.projects.get(repo, lazy=True)
        wanted = set(paths)
        found: dict[str, TreeEntry] = {}
        for folder in sorted({p.rpartition("/")[0] for p in paths}):
            list_tree = partial(
                project.repository_tree, path=folder, ref=ref, get_all=True, per_page=100
            )
            try:
                items = self._call("tree", list_tree)
            except NotFound:
                continue  # no such directory there
            for item in items:
                if item.get("type") == "blob" and item.get("path") in wanted:
                    found[str(item["path"])] = TreeEntry(str(item["mode"]), str(item["id"]))
        return found

    def read_blob(self, repo: str, sha: str) -> bytes:
        project = self._gl.projects.get(repo, lazy=True)
        return bytes(self._call("blob", partial(project.repository_raw_blob, sha)))

    def download_archive(self, repo: str, sha: str, dest: Path) -> None:
        project = self._gl.projects.get(repo, lazy=True)

        def fetch() -> None:
            # Every attempt counts against GitLab.com's archive limit, retries included.
            with self._archive_pacer.slot() as waited, open(dest, "wb") as handle:
                if waited:
                    log.info("forge_archive_paced", repo=repo, waited=round(waited, 1))
                project.repository_archive(
                    sha=sha, format="tar.gz", streamed=True, action=handle.write
                )

        self._call("archive", fetch)

    def commit_files(
        self, repo: str, branch: str, parent: str, message: str, changes: Sequence[FileChange]
    ) -> str:
        project = self._gl.projects.get(repo, lazy=True)
        exists = self.resolve_branch(repo, branch) is not None
        read_at = parent if exists else None
        actions = [a for c in changes for a in self._actions(project, c, read_at)]
        payload: dict[str, Any] = {"branch": branch, "commit_message": message, "actions": actions}
        if not exists:
            payload["start_sha"] = parent
        try:
            created = self._call(
                "commit", partial(project.commits.create, payload), idempotent=False
            )
        except ForgeError as exc:
            if exc.status == 400 and any(m in str(exc) for m in _MOVED):
                raise BranchMoved(f"{branch} moved while committing: {exc}", 400) from exc
            raise
        return str(created.attributes["id"])

    def _actions(
        self, project: Any, change: FileChange, parent: str | None
    ) -> list[dict[str, Any]]:
        """The commit actions for one file. On an existing branch, GitLab applies them to its
        head whatever it is now, so each update or delete carries the file's `last_commit_id` as
        of `parent`: if anyone changed the file since, GitLab refuses the commit (400 "The file
        has changed since you started editing it"; Files::MultiService#validate_file_status!,
        https://docs.gitlab.com/api/commits/#create-a-commit-with-multiple-files-and-actions).
        `update` keeps the file's mode; a new executable needs a `chmod` action
        (`execute_filemode`, "only considered for chmod action")."""
        path = change.path
        if change.content is None:
            action: dict[str, Any] = {"action": "delete", "file_path": path}
        else:
            kind = "update" if change.existed else "create"
            action = {"action": kind, "file_path": path, "content": change.content}
        if change.existed and parent is not None:
            files = project.files
            found = self._call("file", partial(files.get, file_path=path, ref=parent))
            action["last_commit_id"] = str(found.attributes["last_commit_id"])
        actions = [action]
        if change.content is not None and not change.existed and change.mode == "100755":
            actions.append({"action": "chmod", "file_path": path, "execute_filemode": True})
        return actions

    def find_change_request(self, repo: str, branch: str) -> ChangeRequest | None:
        mrs = self._gl.projects.get(repo, lazy=True).mergerequests
        found = self._call(
            "find_mr", partial(mrs.list, source_branch=branch, state="opened", get_all=True)
        )
        # The listing filters on the branch name only and includes requests from forks: a
        # fork's branch named like ours is not our request (only this project's own counts).
        ours = [
            dict(mr.attributes)
            for mr in found
            if mr.attributes.get("source_project_id") == mr.attributes.get("target_project_id")
        ]
        return _change_request(ours[0]) if ours else None

    def open_change_request(
        self, repo: str, branch: str, base: str, title: str, body: str, draft: bool = True
    ) -> ChangeRequest:
        mrs = self._gl.projects.get(repo, lazy=True).mergerequests
        payload = {
            "source_branch": branch,
            "target_branch": base,
            "title": f"Draft: {title}" if draft else title,
            "description": body,
        }
        created = self._call("open_mr", partial(mrs.create, payload), idempotent=False)
        return _change_request(dict(created.attributes))

    # -- internals ----------------------------------------------------------------------------

    def _comment(self, repo: str, note: dict[str, Any]) -> Comment:
        author = note.get("author") or {}
        login = author.get("username", "")
        if author.get("id") is not None and login:
            self._user_ids.put(login, int(author["id"]))
        is_bot = bool(author.get("bot")) or bool(_BOT_NAME.match(login))
        note_id = str(note["id"])
        thread = self._threads.get(note_id) if note.get("type") in _THREADED else None
        return Comment(
            id=note_id,
            author=login,
            body=clean_text(note.get("body")),
            created_at=parse_time(note["created_at"]),
            updated_at=parse_time(note.get("updated_at") or note["created_at"]),
            permission=Permission.NONE if is_bot or not login else self.permission(repo, login),
            author_is_bot=is_bot,
            is_system=bool(note.get("system")),
            kind="review" if note.get("type") == "DiffNote" else "conversation",
            position=_position(note.get("position")),
            thread_id=thread[1] if thread else None,
            in_reply_to=thread[2] if thread and thread[2] != note_id else None,
            # `confidential` is the name before GitLab 15.0; both are sent since.
            internal=bool(note.get("internal") or note.get("confidential")),
        )


def _position(data: Any) -> ReviewPosition | None:
    """A DiffNote's place: an added line has only `new_line`, a removed one only `old_line`
    (then it counts in the old file, GitHub's LEFT side), an unchanged one both.
    https://docs.gitlab.com/ee/api/discussions.html#create-a-new-thread-in-the-merge-request-diff"""
    if not isinstance(data, dict) or not (data.get("new_path") or data.get("old_path")):
        return None
    new_path, old_path = data.get("new_path") or data["old_path"], data.get("old_path")
    new_line, old_line = data.get("new_line"), data.get("old_line")
    return ReviewPosition(
        path=clean_text(new_path),
        line=new_line if new_line is not None else old_line,
        side="RIGHT" if new_line is not None or old_line is None else "LEFT",
        old_path=clean_text(old_path) if old_path and old_path != new_path else None,
    )


def _change_request(data: dict[str, Any]) -> ChangeRequest:
    return ChangeRequest(
        number=int(data["iid"]),
        url=str(data.get("web_url", "")),
        head=str(data["source_branch"]),
        base=str(data["target_branch"]),
        draft=bool(data.get("draft")),
    )


def _level(access_level: int) -> Permission:
    for threshold, permission in _ACCESS:
        if access_level >= threshold:
            return permission
    return Permission.NONE


def _summary(repo: str, kind: Kind, data: dict[str, Any]) -> TaskSummary:
    return TaskSummary(
        key=TaskKey(Platform.GITLAB, repo, kind, int(data["iid"])),
        title=data["title"],
        labels=frozenset(data.get("labels") or []),
        assignees=frozenset(a["username"] for a in data.get("assignees") or []),
        updated_at=parse_time(data["updated_at"]),
        is_open=data.get("state") == "opened",
    )


def _translate(exc: Exception, clock: Callable[[], float] = SYSTEM_CLOCK.time) -> ForgeError:
    if isinstance(exc, ForgeError):
        return exc
    if isinstance(exc, requests.exceptions.RequestException):
        return TransientError(f"GitLab request failed: {type(exc).__name__}")
    if not isinstance(exc, GitlabError):
        raise exc
    status = exc.response_code or 0
    message = str(exc.error_message)[:200]
    if isinstance(exc, GitlabAuthenticationError) or status == 401:
        return AuthError("GitLab rejected the token (401)", status)
    if status == 429:
        headers = _Client.last_error_headers()
        bucket = _limited_bucket(headers.get("ratelimit-name", ""))
        return RateLimited("GitLab rate limit", _wait(headers, clock), status, bucket)
    if status == 403:
        return Forbidden(f"GitLab refused this (403): {message}", status)
    if status == 404:
        return NotFound(f"GitLab: not found ({message})", status)
    if status >= 500 or status in (408, 409) or status == 0:
        return TransientError(f"GitLab server error {status}", status)
    return ForgeError(f"GitLab error {status}: {message}", status)


def _limited_bucket(name: str) -> str | None:
    """Which requests a 429 holds. A throttle names itself in `RateLimit-Name`
    (lib/gitlab/rack_attack.rb, `throttled_response_headers`): the files API's own throttle
    holds the files API; the others (throttle_authenticated_api, ...) count every API request,
    so they hold them all. A 429 without a name comes from an endpoint's own limiter
    (lib/gitlab/application_rate_limiter.rb: archives 5 a minute, notes_create, ...): it holds
    that endpoint's bucket only (None: the bucket of the refused request)."""
    if not name:
        return None
    return name if name in _BUCKETS.values() else ALL_BUCKETS


def _wait(headers: dict[str, str], clock: Callable[[], float]) -> float:
    if "retry-after" in headers:
        try:
            return float(headers["retry-after"])
        except ValueError:
            return DEFAULT_RATE_LIMIT_WAIT
    if "ratelimit-reset" in headers:
        # The reset is in whole seconds of the server's clock, measured against its `Date`; a
        # little margin avoids arriving just before it.
        return until_reset(headers, float(headers["ratelimit-reset"]), clock) + RESET_MARGIN
    return DEFAULT_RATE_LIMIT_WAIT
