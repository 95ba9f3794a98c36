"""GitHub adapter on PyGithub.

Reads go through PyGithub's `Requester` so that list polling can be conditional: every GET
carries the ETag of the last answer for that URL and a 304 (which costs no rate limit) reuses
the cached data. PyGithub's own retry/sleep is disabled: `RequestPolicy` decides.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import requests
from github import Auth, Github, GithubException

from bot.core.clock import SYSTEM_CLOCK, format_time, parse_time
from bot.forge._util import LRU, TTLCache, clean_text, folders, next_link
from bot.forge.archive import ArchiveHTTPError, download_redirected
from bot.forge.errors import (
    ALL_BUCKETS,
    AuthError,
    BranchMoved,
    EmptyRepository,
    Forbidden,
    ForgeError,
    NotFound,
    RateLimited,
    TransientError,
)
from bot.forge.github_mentions import GitHubMentions
from bot.forge.github_search import GitHubSearch
from bot.forge.inbox import Cursors, MentionBatch, always
from bot.forge.pacing import ServerWindow
from bot.forge.policy import DEFAULT_BUCKET, RequestPolicy
from bot.forge.ratelimits import Buckets, header, until_reset
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

# Reviews whose verdict says something even without text.
_VERDICTS = ("APPROVED", "CHANGES_REQUESTED")
_ROLE = {
    "admin": Permission.ADMIN,
    "maintain": Permission.MAINTAIN,
    "write": Permission.WRITE,
    "triage": Permission.TRIAGE,
    "read": Permission.READ,
}
# GitHub's documented default when a secondary limit comes without retry-after.
SECONDARY_LIMIT_WAIT = 60.0
RESET_MARGIN = 0.5
DEFAULT_PER_PAGE = 30  # GitHub's, when a request names none
LABEL_COLOR = "ededed"
COMPARE_FILES = 300  # the most files "Compare two commits" lists


@dataclass(frozen=True)
class _Cached:
    etag: str
    data: Any
    next_url: str | None


class GitHubForge:
    platform = Platform.GITHUB
    # Project by project an idle cycle costs 7 conditional requests per repository; across
    # them, 2 searches per owner (+1 notifications): across from 3 repositories on.
    cross_repo_from = 3

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        watch_labels: Sequence[str],
        watch_assigned: bool = True,
        timeout: float = 30.0,
        seconds_between_writes: float = 1.0,
        policy: RequestPolicy | None = None,
        wall_clock: Callable[[], float] = SYSTEM_CLOCK.time,
        permission_ttl: float = 600.0,
        auth: Auth.Auth | None = None,
        identity: User | None = None,
    ) -> None:
        # `auth` replaces `token` for a GitHub App installation (tokens minted and refreshed by
        # PyGithub); `identity` is then the app's bot, since `GET /user` is not available.
        self._auth = auth or Auth.Token(token)
        self._gh = Github(
            auth=self._auth,
            base_url=api_url.rstrip("/"),
            timeout=int(timeout),
            retry=None,
            per_page=100,
            seconds_between_requests=None,
            seconds_between_writes=seconds_between_writes or None,
            lazy=True,
        )
        self._req = self._gh.requester
        self._api = api_url.rstrip("/")
        self._timeout = timeout
        self._policy = policy or RequestPolicy(host=api_url)
        self._translate: Callable[[Exception], ForgeError] = partial(_translate, clock=wall_clock)
        self._watch_labels = tuple(watch_labels)
        self._watch_assigned = watch_assigned
        self._etags: LRU[str, _Cached] = LRU(4096)
        self._permissions: TTLCache[tuple[str, str], Permission] = TTLCache(permission_ttl)
        self._me: User | None = identity
        self._labels_ready: set[tuple[str, str]] = set()
        self._wall_clock = wall_clock
        self._buckets = Buckets()
        # Searches are paced by the search bucket's own window, as its answers tell it.
        self._search_window = ServerWindow(clock=self._policy.clock, wait=self._policy.stop.wait)
        self._search = GitHubSearch(
            partial(self._conditional_get, bucket="search"), _summary, self._search_window
        )
        self._mentions = GitHubMentions(
            self._notifications,
            self._mark_read,
            self.get_thread,
            self.list_comments,
            self.permission,
            api=self._api,
            clock=wall_clock,
        )

    @property
    def _auth_headers(self) -> dict[str, str]:
        # Read at each use: an installation token is refreshed before it expires.
        return {
            "Authorization": f"{self._auth.token_type} {self._auth.token}",
            "Accept": "application/vnd.github+json",
            "User-Agent": "coding-agent-bot",
        }

    def rate_limits(self) -> dict[str, int]:
        """Requests left per bucket (core, search, ...), from the last answer in each."""
        return self._buckets.remaining()

    def _request(
        self,
        verb: str,
        url: str,
        parameters: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        input: Any | None = None,
    ) -> tuple[dict[str, Any], Any]:
        """One API request through PyGithub, its rate-limit headers noted (refusals too)."""
        try:
            response_headers, data = self._req.requestJsonAndCheck(
                verb, url, parameters, headers, input
            )
        except GithubException as exc:
            self._note_limits(exc.headers or {})
            raise
        self._note_limits(response_headers)
        return response_headers, data

    def _note_limits(self, headers: dict[str, Any]) -> None:
        remaining = header(headers, "x-ratelimit-remaining")
        if not remaining:
            return  # GHES with rate limiting off sends none
        bucket = header(headers, "x-ratelimit-resource") or DEFAULT_BUCKET
        self._buckets.record(bucket, remaining)
        reset = header(headers, "x-ratelimit-reset")
        if bucket == "search" and remaining.isdigit() and reset.isdigit():
            wait = until_reset(headers, float(reset), self._wall_clock)
            self._search_window.observe(int(remaining), wait)

    # -- identity and discovery -------------------------------------------------------------

    def whoami(self) -> User:
        if self._me is None:
            data = self._get("/user")
            self._me = User(data["login"], int(data["id"]), data.get("type") == "Bot")
        return self._me

    def list_tasks(self, repo: str) -> list[TaskSummary]:
        queries: list[dict[str, Any]] = [{"labels": label} for label in self._watch_labels]
        me = self.whoami() if self._watch_assigned else None
        # An app's `<slug>[bot]` is never an assignee (issues are assigned to users), so
        # `?assignee=<slug>[bot]` is answered 200 with nothing (an unknown login filters every
        # issue out rather than failing): one request per repository and cycle for nothing.
        # Search leaves it out likewise (`list_tasks_across`).
        if me is not None and not me.is_bot:
            queries.append({"assignee": me.login})
        found: dict[TaskKey, TaskSummary] = {}
        for query in queries:
            params = {"state": "open", "per_page": 100, **query}
            for item in self._get_all(f"/repos/{repo}/issues", params):
                summary = _summary(repo, item)
                found[summary.key] = summary
        return sorted(found.values(), key=lambda s: s.key)

    def list_tasks_across(self, repos: Sequence[str]) -> tuple[list[TaskSummary], list[str]]:
        """Candidates in all of `repos` through search (cost per owner, not per repository);
        the repositories search could not cover, to be listed one by one."""
        me = self.whoami()
        assignee = me.login if self._watch_assigned and not me.is_bot else None
        found = self._search.list_tasks(repos, self._watch_labels, assignee)
        return found.tasks, found.uncovered

    def mentioned_tasks(self, repos: Sequence[str]) -> list[TaskSummary]:
        """Open threads of `repos` where a writer mentioned the bot since the last call, settled
        at once (a caller without a store; the daemon uses `mention_batch`)."""
        batch = self.mention_batch(repos)
        batch.commit(always)
        return batch.tasks

    def mention_batch(self, repos: Sequence[str], cursors: Cursors | None = None) -> MentionBatch:
        """The notifications' threads of `repos` where a writer called the bot; nothing is
        marked read before `commit` (see `bot.forge.github_mentions`)."""
        return self._mentions.read(repos, self.whoami(), cursors)

    def _notifications(
        self, url: str, params: dict[str, Any] | None, headers: dict[str, str]
    ) -> tuple[dict[str, Any], Any]:
        fetch = partial(self._request, "GET", url, params, headers)
        response_headers, data = self._policy.call("notifications", fetch, self._translate)
        return response_headers, data

    def _mark_read(self, thread_id: str) -> None:
        url = f"/notifications/threads/{quote(thread_id, safe='')}"
        self._policy.call(
            "notification_read",
            partial(self._request, "PATCH", url),
            self._translate,
        )

    # -- threads and comments -----------------------------------------------------------------

    def get_thread(self, key: TaskKey) -> Thread:
        issue = self._get(f"/repos/{key.repo}/issues/{key.number}")
        pull = self._get(f"/repos/{key.repo}/pulls/{key.number}") if key.kind is Kind.PULL else {}
        head = pull.get("head") or {}
        base = pull.get("base") or {}
        return Thread(
            key=key,
            title=clean_text(issue["title"]),
            body=clean_text(issue.get("body")),
            author=(issue.get("user") or {}).get("login", ""),
            state=issue["state"],
            labels=frozenset(label["name"] for label in issue.get("labels", [])),
            assignees=frozenset(a["login"] for a in issue.get("assignees") or []),
            created_at=parse_time(issue["created_at"]),
            updated_at=parse_time(issue["updated_at"]),
            web_url=issue.get("html_url", ""),
            head_ref=head.get("ref"),
            head_sha=head.get("sha"),
            base_ref=base.get("ref"),
            head_repo=((head.get("repo") or {}).get("full_name")),
            maintainer_can_modify=bool(pull.get("maintainer_can_modify")),
        )

    def list_comments(self, key: TaskKey, since: datetime | None = None) -> list[Comment]:
        params: dict[str, Any] = {"per_page": 100}
        if since is not None:
            params["since"] = format_time(since)
        paths = [(f"/repos/{key.repo}/issues/{key.number}/comments", "conversation")]
        if key.kind is Kind.PULL:
            paths.append((f"/repos/{key.repo}/pulls/{key.number}/comments", "review"))
        comments = [
            self._comment(key.repo, item, kind)
            for path, kind in paths
            for item in self._get_all(path, params)
        ]
        if key.kind is Kind.PULL:
            summaries, submitted = self._reviews(key, since)
            comments += summaries + self._review_comments(key, submitted, comments)
        return sorted(comments, key=lambda c: (c.created_at, c.id))

    def control_events(self, key: TaskKey) -> list[ControlEvent]:
        # Issue events cover pull requests too: https://docs.github.com/en/rest/issues/events
        path = f"/repos/{key.repo}/issues/{key.number}/events"
        events = []
        for item in self._get_all(path, {"per_page": 100}):
            kind = item.get("event")
            if kind in ("labeled", "unlabeled"):
                name = (item.get("label") or {}).get("name", "")
            elif kind == "assigned":
                name = (item.get("assignee") or {}).get("login", "")
            else:
                continue
            actor = (item.get("actor") or {}).get("login", "")
            at = parse_time(item.get("created_at"))
            events.append(ControlEvent(kind, name, actor, at, str(item.get("id", ""))))
        return events

    def _reviews(self, key: TaskKey, since: datetime | None) -> tuple[list[Comment], list[str]]:
        """Reviews' own text and verdict ("Request changes: ..."), as comments; and the ids of
        the reviews submitted since `since`.

        The endpoint has no `since` and no `updated_at` (an edited review text is not seen
        again): every page is read with conditional requests (an unchanged list costs no rate
        limit) and filtered here by `submitted_at`. Pending reviews are their author's draft;
        a COMMENTED review without text only wraps line comments, which arrive on their own.
        https://docs.github.com/rest/pulls/reviews#list-reviews-for-a-pull-request
        """
        items = self._get_all(f"/repos/{key.repo}/pulls/{key.number}/reviews", {"per_page": 100})
        out, submitted_ids = [], []
        for item in items:
            state, submitted = str(item.get("state") or ""), item.get("submitted_at")
            if state == "PENDING" or not submitted:
                continue
            if since is not None and parse_time(submitted) < since:
                continue
            submitted_ids.append(str(item["id"]))
            if not (item.get("body") or "").strip() and state not in _VERDICTS:
                continue
            stamped = {**item, "created_at": submitted, "updated_at": submitted}
            out.append(self._comment(key.repo, stamped, "review_summary"))
        return out, submitted_ids

    def _review_comments(
        self, key: TaskKey, reviews: Sequence[str], known: Sequence[Comment]
    ) -> list[Comment]:
        """The line comments of reviews submitted since the last check. They were drafted
        while the review was pending, so their own times can be older than the `since` window
        of the review comment listing: read them from their review.
        https://docs.github.com/rest/pulls/reviews#list-comments-for-a-pull-request-review"""
        seen = {c.id for c in known}
        out = []
        for review in reviews:
            url = f"/repos/{key.repo}/pulls/{key.number}/reviews/{review}/comments"
            for item in self._get_all(url, {"per_page": 100}):
                comment = self._comment(key.repo, item, "review")
                if comment.id not in seen:
                    seen.add(comment.id)
                    out.append(comment)
        return out

    def post_comment(self, key: TaskKey, body: str, reply_to: str | None = None) -> Comment:
        # Not retried on a transient error: the POST may have landed. Callers look up the
        # comment's hidden marker before posting again (replies are in the review comment
        # listing, which `list_comments` reads too).
        root = self._review_root(key, reply_to) if reply_to else None
        if root is not None:
            # https://docs.github.com/rest/pulls/comments#create-a-reply-for-a-review-comment
            url = f"/repos/{key.repo}/pulls/{key.number}/comments/{root}/replies"
        else:
            url = f"/repos/{key.repo}/issues/{key.number}/comments"
        _, data = self._policy.call(
            "post_comment",
            lambda: self._request("POST", url, input={"body": body}),
            self._translate,
            idempotent=False,
        )
        return self._comment(key.repo, data, "conversation" if root is None else "review")

    def _review_root(self, key: TaskKey, comment_id: str) -> str | None:
        """The top-level review comment of `comment_id`'s thread ("Replies to replies are not
        supported"), or None when it is no review comment of this pull request: the answer
        then goes to the main conversation."""
        kind, _, number = comment_id.partition(":")
        if key.kind is not Kind.PULL or kind != "review" or not number.isdigit():
            return None
        try:
            item = self._get(f"/repos/{key.repo}/pulls/comments/{number}")
        except NotFound:
            return None
        if not str(item.get("pull_request_url", "")).endswith(f"/pulls/{key.number}"):
            return None
        return str(item.get("in_reply_to_id") or item["id"])

    def edit_comment(self, key: TaskKey, comment_id: str, body: str) -> Comment:
        kind, _, number = comment_id.partition(":")
        section = "pulls" if kind == "review" else "issues"
        url = f"/repos/{key.repo}/{section}/comments/{number}"
        _, data = self._policy.call(
            "edit_comment",
            lambda: self._request("PATCH", url, input={"body": body}),
            self._translate,
        )
        return self._comment(key.repo, data, "review" if kind == "review" else "conversation")

    def add_labels(self, key: TaskKey, labels: Sequence[str]) -> None:
        if not labels:
            return
        self._ensure_labels(key.repo, labels)
        url = f"/repos/{key.repo}/issues/{key.number}/labels"
        self._policy.call(
            "add_labels",
            lambda: self._request("POST", url, input={"labels": list(labels)}),
            self._translate,
        )

    def _ensure_labels(self, repo: str, labels: Sequence[str]) -> None:
        """Create each label in the repository the first time it is used (whatever the token:
        GitHub creates a missing label on an issue only for some); 422 `already_exists` is
        the common answer and fine (docs.github.com/rest/issues/labels#create-a-label)."""
        for name in labels:
            if (repo, name) in self._labels_ready:
                continue
            url = f"/repos/{repo}/labels"
            body = {"name": name, "color": LABEL_COLOR}
            try:
                self._write("create_label", "POST", url, body)
            except ForgeError as exc:
                if exc.status not in (403, 422):  # 403: may not create; adding may still work
                    raise
            self._labels_ready.add((repo, name))

    def remove_labels(self, key: TaskKey, labels: Sequence[str]) -> None:
        for label in labels:
            url = f"/repos/{key.repo}/issues/{key.number}/labels/{quote(label, safe='')}"
            try:
                self._policy.call(
                    "remove_label",
                    partial(self._request, "DELETE", url),
                    self._translate,
                )
            except NotFound:
                continue  # already gone: the goal state holds

    # -- repository ---------------------------------------------------------------------------

    def permission(self, repo: str, login: str) -> Permission:
        cached = self._permissions.get((repo, login))
        if cached is not None:
            return cached
        try:
            data = self._get(f"/repos/{repo}/collaborators/{quote(login, safe='')}/permission")
            level = _ROLE.get(data.get("role_name", ""), _ROLE.get(data.get("permission", "")))
            permission = level if level is not None else Permission.NONE
        except NotFound:
            permission = Permission.NONE
        self._permissions.put((repo, login), permission)
        return permission

    def default_branch(self, repo: str) -> str:
        return str(self._get(f"/repos/{repo}")["default_branch"])

    def read_file(self, repo: str, path: str, ref: str) -> bytes:
        data = self._get(f"/repos/{repo}/contents/{quote(path)}", {"ref": ref})
        if not isinstance(data, dict) or data.get("type") != "file":
            raise NotFound(f"{repo}:{path}@{ref} is not a file", 404)
        return base64.b64decode(data.get("content") or "")

    # -- publishing ----------------------------------------------------------------------------

    def resolve_branch(self, repo: str, branch: str) -> BranchHead | None:
        try:
            ref = self._get(f"/repos/{repo}/git/ref/heads/{quote(branch)}")
        except NotFound:
            return None
        sha = ref["object"]["sha"]
        commit = self._get(f"/repos/{repo}/git/commits/{sha}")
        return BranchHead(sha, commit.get("message", ""))

    def tree_entries(self, repo: str, ref: str, paths: Sequence[str]) -> dict[str, TreeEntry]:
        """One "Get a tree" per folder on the way to `paths`, following subtree ids from the
        root (no `recursive`, which is truncated past 100,000 entries).
        https://docs.github.com/rest/git/trees#get-a-tree"""
        trees = {"": str(self._get(f"/repos/{repo}/git/commits/{ref}")["tree"]["sha"])}
        wanted = set(paths)
        found: dict[str, TreeEntry] = {}
        for folder in folders(paths):
            if folder not in trees:
                continue  # its parent has no such directory
            for item in self._get(f"/repos/{repo}/git/trees/{trees[folder]}").get("tree", []):
                full = f"{folder}/{item['path']}" if folder else str(item["path"])
                if item.get("type") == "tree":
                    trees[full] = str(item["sha"])
                elif full in wanted:
                    found[full] = TreeEntry(str(item["mode"]), str(item["sha"]))
        return found

    def read_blob(self, repo: str, sha: str) -> bytes:
        return base64.b64decode(self._get(f"/repos/{repo}/git/blobs/{sha}").get("content") or "")

    def download_archive(self, repo: str, sha: str, dest: Path) -> None:
        # The API answers with a redirect to the archive host (codeload.github.com, or
        # /_codeload/ on a GHES host) whose link carries its own token: ours is never sent there.
        url = f"{self._api}/repos/{repo}/tarball/{quote(sha, safe='')}"

        def fetch() -> None:  # headers read inside: minting a token is a request too
            download_redirected(url, self._auth_headers, dest, timeout=self._timeout)

        self._policy.call("archive", fetch, self._translate)

    def changed_paths(self, repo: str, base: str, head: str) -> ChangedPaths:
        """ "Compare two commits" (`base...head`, from the merge base). "The list of changed
        files ... includes up to 300 changed files for the entire comparison"; at 300 the list
        may be cut. https://docs.github.com/rest/commits/commits#compare-two-commits"""
        data = self._get(f"/repos/{repo}/compare/{quote(base)}...{quote(head)}", {"per_page": 1})
        files = data.get("files") or []
        paths = {str(f["filename"]) for f in files} | {
            str(f["previous_filename"]) for f in files if f.get("previous_filename")
        }
        ancestor = data.get("status") in ("behind", "identical")
        return ChangedPaths(frozenset(paths), len(files) < COMPARE_FILES, ancestor)

    def commit_files(
        self, repo: str, branch: str, parent: str, message: str, changes: Sequence[FileChange]
    ) -> str:
        base_tree = self._get(f"/repos/{repo}/git/commits/{parent}")["tree"]["sha"]
        entries = [
            {"path": c.path, "mode": c.mode, "type": "blob", "content": c.content}
            if c.content is not None
            else {"path": c.path, "mode": c.mode, "type": "blob", "sha": None}
            for c in changes
        ]
        tree = self._write(
            "create_tree",
            "POST",
            f"/repos/{repo}/git/trees",
            {"base_tree": base_tree, "tree": entries},
        )
        commit = self._write(
            "create_commit",
            "POST",
            f"/repos/{repo}/git/commits",
            {"message": message, "tree": tree["sha"], "parents": [parent]},
        )
        sha = str(commit["sha"])
        try:
            if self.resolve_branch(repo, branch) is None:
                self._write(
                    "create_ref",
                    "POST",
                    f"/repos/{repo}/git/refs",
                    {"ref": f"refs/heads/{branch}", "sha": sha},
                )
            else:
                # Never forced: a 422 "Update is not a fast forward" means someone pushed.
                self._write(
                    "update_ref",
                    "PATCH",
                    f"/repos/{repo}/git/refs/heads/{quote(branch)}",
                    {"sha": sha, "force": False},
                )
        except ForgeError as exc:
            # Not a fast forward, or created meanwhile. A protected branch or a ruleset also
            # answers 422, but retrying cannot help there: that one stays a refusal.
            refused = any(word in str(exc).lower() for word in ("protected", "rule"))
            if exc.status == 422 and not refused:
                raise BranchMoved(f"{branch} moved while committing: {exc}", 422) from exc
            raise
        return sha

    def find_change_request(self, repo: str, branch: str) -> ChangeRequest | None:
        owner = repo.split("/")[0]
        pulls = self._get_all(
            f"/repos/{repo}/pulls", {"head": f"{owner}:{branch}", "state": "open"}
        )
        return _change_request(pulls[0]) if pulls else None

    def open_change_request(
        self, repo: str, branch: str, base: str, title: str, body: str, draft: bool = True
    ) -> ChangeRequest:
        data = self._write(
            "open_pull",
            "POST",
            f"/repos/{repo}/pulls",
            {"title": title, "head": branch, "base": base, "body": body, "draft": draft},
        )
        return _change_request(data)

    def _write(self, operation: str, verb: str, url: str, body: dict[str, Any]) -> Any:
        # Writes are not retried inside the call: the caller looks the result up first.
        _, data = self._policy.call(
            operation,
            partial(self._request, verb, url, input=body),
            self._translate,
            idempotent=False,
        )
        return data

    # -- internals ----------------------------------------------------------------------------

    def _comment(self, repo: str, item: dict[str, Any], kind: str) -> Comment:
        user = item.get("user") or {}
        login = user.get("login", "")
        is_bot = user.get("type") == "Bot"
        prefix = {"review": "review", "review_summary": "pull-review"}.get(kind, "issue")
        review = kind == "review"
        parent = item.get("in_reply_to_id") if review else None
        return Comment(
            id=f"{prefix}:{item['id']}",
            author=login,
            body=clean_text(item.get("body")),
            created_at=parse_time(item["created_at"]),
            updated_at=parse_time(item["updated_at"]),
            permission=Permission.NONE if is_bot or not login else self.permission(repo, login),
            author_is_bot=is_bot,
            kind=kind,
            position=_position(item) if review else None,
            thread_id=f"review:{parent or item['id']}" if review else None,
            in_reply_to=f"review:{parent}" if parent else None,
            review_state=str(item.get("state", "")).lower() if kind == "review_summary" else None,
        )

    def _get(self, url: str, params: dict[str, Any] | None = None) -> Any:
        data, _ = self._conditional_get(url, params)
        return data

    def _get_all(self, url: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        page_url: str | None = url
        page_params: dict[str, Any] | None = params
        while page_url is not None:
            data, page_url = self._conditional_get(page_url, page_params)
            page_params = None  # the Link header carries the query
            items.extend(data or [])
        return items

    def _conditional_get(
        self, url: str, params: dict[str, Any] | None, bucket: str = DEFAULT_BUCKET
    ) -> tuple[Any, str | None]:
        cache_key = f"{url}?{urlencode(sorted((params or {}).items()))}"
        cached = self._etags.get(cache_key)
        headers = {"If-None-Match": cached.etag} if cached else {}
        response_headers, data = self._policy.call(
            "get",
            lambda: self._request("GET", url, params, headers),
            self._translate,
            bucket=bucket,
        )
        if data is None and cached is not None:  # 304 Not Modified
            return cached.data, cached.next_url or _page_after_full(url, params, cached.data)
        following = next_link(response_headers.get("link"))
        etag = response_headers.get("etag")
        if etag:
            self._etags.put(cache_key, _Cached(etag, data, following))
        return data, following


def _page_after_full(url: str, params: dict[str, Any] | None, data: Any) -> str | None:
    """The page after this one when it was full and had no next page: a 304 for it says only
    that its own items are the same. GitHub's ETag covers the body, not the `Link` header, so
    a list whose newest items land on a later page (events, reviews, comments: oldest first)
    answers 304 for a full page 1 after page 2 appeared, with no Link (app-sre/github-mirror#57,
    #290). None when the page was not full: then no later page can have appeared."""
    if not isinstance(data, list):
        return None
    split = urlsplit(url)
    query = dict(parse_qsl(split.query))
    query.update({k: str(v) for k, v in (params or {}).items()})
    per_page = int(query.get("per_page") or DEFAULT_PER_PAGE)
    if not data or len(data) < per_page:
        return None
    query["page"] = str(int(query.get("page") or 1) + 1)
    return urlunsplit(split._replace(query=urlencode(query)))


def _position(item: dict[str, Any]) -> ReviewPosition | None:
    """A review comment's place: `line` on `side` of the diff (null when outdated, then
    `original_line`); a comment on a whole file has no line.
    https://docs.github.com/rest/pulls/comments#get-a-review-comment-for-a-pull-request"""
    if not item.get("path"):
        return None
    on_file = item.get("subject_type") == "file"
    return ReviewPosition(
        path=clean_text(item["path"]),
        line=None if on_file else item.get("line"),
        side=str(item.get("side") or "RIGHT"),
        start_line=None if on_file else item.get("start_line"),
        original_line=None if on_file else item.get("original_line"),
        diff_hunk=clean_text(item.get("diff_hunk")),
    )


def _change_request(data: dict[str, Any]) -> ChangeRequest:
    return ChangeRequest(
        number=int(data["number"]),
        url=str(data.get("html_url", "")),
        head=str(data["head"]["ref"]),
        base=str(data["base"]["ref"]),
        draft=bool(data.get("draft")),
    )


def _summary(repo: str, item: dict[str, Any]) -> TaskSummary:
    kind = Kind.PULL if "pull_request" in item else Kind.ISSUE
    return TaskSummary(
        key=TaskKey(Platform.GITHUB, repo, kind, int(item["number"])),
        title=item["title"],
        labels=frozenset(label["name"] for label in item.get("labels", [])),
        assignees=frozenset(a["login"] for a in item.get("assignees") or []),
        updated_at=parse_time(item["updated_at"]),
    )


def _translate(exc: Exception, clock: Callable[[], float] = SYSTEM_CLOCK.time) -> ForgeError:
    if isinstance(exc, GithubException):
        return _translate_status(exc.status, exc.headers or {}, exc.data, clock)
    if isinstance(exc, ArchiveHTTPError) and exc.status is not None:
        return _translate_status(exc.status, exc.headers, exc.data, clock)
    if isinstance(exc, requests.exceptions.HTTPError) and exc.response is not None:
        status = exc.response.status_code
        if status == 404:
            return NotFound("GitHub: archive not found", status)
        if status < 500:
            return ForgeError(f"GitHub archive download failed ({status})", status)
    if isinstance(exc, requests.exceptions.RequestException):
        return TransientError(f"GitHub request failed: {type(exc).__name__}")
    if isinstance(exc, ForgeError):
        return exc
    raise exc


def _translate_status(
    status: int, headers: dict[str, Any], data: Any, clock: Callable[[], float]
) -> ForgeError:
    message = data.get("message", "") if isinstance(data, dict) else ""
    details = [
        str(e.get("message"))
        for e in (data.get("errors") if isinstance(data, dict) else None) or []
        if isinstance(e, dict) and e.get("message")
    ]
    if details:  # "Validation Failed" alone says nothing a person can act on
        message = f"{message}: {'; '.join(details)}"
    message = str(message)[:300]
    lowered = message.lower()
    if status in (403, 429):
        limit = _rate_limit_wait(headers, lowered, clock)
        if limit is not None:
            wait, bucket = limit
            return RateLimited(f"GitHub rate limit: {message}", wait, status, bucket)
    if status == 401:
        return AuthError("GitHub rejected the token (401)", status)
    if status == 403:
        return Forbidden(f"GitHub refused this (403): {message}", status)
    if status == 404:
        return NotFound(f"GitHub: not found ({message})", status)
    if status == 409 and "empty" in lowered:
        # The git database API answers 409 "Git Repository is empty." on a repository
        # without commits (https://docs.github.com/en/rest/git/refs#get-a-reference).
        return EmptyRepository(f"GitHub: {message}", status)
    if status >= 500 or status in (408, 409):
        return TransientError(f"GitHub server error {status}", status)
    return ForgeError(f"GitHub error {status}: {message}", status)


def _rate_limit_wait(
    headers: dict[str, Any], message: str, clock: Callable[[], float]
) -> tuple[float, str | None] | None:
    """How long a refusal asks us to wait, and the bucket it holds: the one GitHub names in
    `x-ratelimit-resource` for a primary limit; every bucket for a secondary one, which
    counts the client's requests as a whole (docs.github.com/rest/using-the-rest-api/
    rate-limits-for-the-rest-api, "About secondary rate limits"). None: no rate limit."""
    bucket = header(headers, "x-ratelimit-resource") or None
    retry_after = header(headers, "retry-after")
    if retry_after:
        try:
            return float(retry_after), ALL_BUCKETS
        except ValueError:
            return SECONDARY_LIMIT_WAIT, ALL_BUCKETS
    reset = header(headers, "x-ratelimit-reset")
    if header(headers, "x-ratelimit-remaining") == "0" and reset:
        # The reset is in whole seconds of the server's clock, measured against its `Date`;
        # a little margin avoids arriving just before it.
        return until_reset(headers, float(reset), clock) + RESET_MARGIN, bucket
    if "rate limit" in message:
        return SECONDARY_LIMIT_WAIT, ALL_BUCKETS
    return None
