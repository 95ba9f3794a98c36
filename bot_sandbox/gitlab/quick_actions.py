"""GitLab quick actions, as GitLab runs them in notes and issue / merge request descriptions.

Sources: https://docs.gitlab.com/user/project/quick_actions/ ("Each command starts with a
forward slash (/) and must be entered on a separate line"; they "run automatically when you
save descriptions or comments"), and GitLab's `lib/gitlab/quick_actions/extractor.rb`, whose
pattern is ported below unchanged: `\\r` is deleted first; a fenced ```` ``` ```` block, a
backtick span reaching a line that ends with a backtick, an HTML block and a `>>>` quote are
skipped; a known command at the very start of any other line is run and its line removed.
Unknown commands (such as the bot's own `/bot ...`) are not matched and stay in the text.

Conditions follow `issuable_actions.rb`, `issue_and_merge_request_actions.rb` and
`merge_request_actions.rb`: /close only on an open thread and /reopen only on a closed one,
both needing update rights (Reporter, or the thread's author); labels, assignees and the
discussion lock need Reporter; /merge and /approve need Developer and a merge request. /merge
also needs the note's `merge_request_diff_head_sha` to equal the request's head (current
GitLab: "The `/merge` quick action requires the SHA of the head of the branch") and a request
that is not a draft. A command that does not apply is still removed from the text, as GitLab
does.

API effect (`lib/api/helpers/notes_helpers.rb`, `process_note_creation_result`): a note that
held only commands is not saved; the answer is 202 with `commands_changes` and `summary`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot_sandbox.world import SRepo, SThread, SUser, World

COMMANDS = (
    "close",
    "reopen",
    "merge",
    "approve",
    "unapprove",
    "assign",
    "unassign",
    "label",
    "labels",
    "unlabel",
    "remove_label",
    "lock",
    "unlock",
    "title",
)
_RANK = {"none": 0, "read": 10, "triage": 20, "write": 30, "maintain": 40, "admin": 50}
REPORTER, DEVELOPER = _RANK["triage"], _RANK["write"]

# extractor.rb `commands_regex`: Ruby's /m is Python's DOTALL; Ruby's ^ and $ always match at
# line boundaries (Python's MULTILINE). The second `html` group (>>> quotes) is renamed.
_EXTRACTOR = re.compile(
    r"""
      (?P<code> ^``` .+? \n```$ )
    | (?P<inline_code> ^.*`\n* .+? \n*`$ )
    | (?P<html> ^<[^>]+?>\n .+? \n</[^>]+?>$ )
    | (?P<quote> ^>>> .+? \n>>>$ )
    | (?: ^/ (?P<cmd>"""
    + "|".join(sorted(COMMANDS, key=len, reverse=True))
    + r""") (?: [ ] (?P<arg>[^\n]*) )? (?: \s*\n | $ ) )
    """,
    re.DOTALL | re.MULTILINE | re.IGNORECASE | re.VERBOSE,
)


@dataclass
class Outcome:
    """What a text's quick actions did."""

    text: str  # the text as GitLab saves it
    commands: list[tuple[str, str]] = field(default_factory=list)  # extracted, run or not
    changes: dict[str, Any] = field(default_factory=dict)  # API `commands_changes`
    summary: list[str] = field(default_factory=list)  # API `summary`

    @property
    def commands_only(self) -> bool:
        return bool(self.commands) and not self.text.strip()


def extract(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The text without its command lines, and the commands (lower-cased name, argument)."""
    content = text.replace("\r", "")
    if not re.search(r"^/", content, re.MULTILINE):  # no command can match: skip the big regex
        return text, []
    commands: list[tuple[str, str]] = []

    def take(match: re.Match[str]) -> str:
        if match["cmd"] is None:
            return match[0]
        commands.append((match["cmd"].lower(), (match["arg"] or "").strip()))
        return ""

    stripped = _EXTRACTOR.sub(take, content)
    return (stripped.rstrip(), commands) if commands else (text, [])


def run(
    world: World,
    repo: SRepo,
    thread: SThread,
    actor: SUser,
    text: str,
    head_sha: str | None = None,
) -> Outcome:
    """Extract and execute the quick actions of `text`, written by `actor` on `thread`;
    `head_sha` is the note's `merge_request_diff_head_sha`, if it gave one."""
    content, commands = extract(text)
    outcome = Outcome(content, commands)
    with world.lock:
        for name, arg in commands:
            action = _ACTIONS.get(name)
            if action is not None:
                action(_Context(world, repo, thread, actor, outcome, head_sha), arg)
        if outcome.changes:
            # The commands are one update of the thread (Notes::QuickActionsService hands them
            # to Issues/MergeRequests::UpdateService), which fires its Issue or Merge Request
            # Hook like any other update.
            world.changed(repo.platform, repo.path, thread, "update", actor.login)
    return outcome


@dataclass
class _Context:
    world: World
    repo: SRepo
    thread: SThread
    actor: SUser
    outcome: Outcome
    head_sha: str | None

    def rank(self) -> int:
        return _RANK.get(self.repo.roles.get(self.actor.login, "none"), 0)

    def can_update(self) -> bool:
        return self.rank() >= REPORTER or self.thread.author.login == self.actor.login

    def done(self, change: dict[str, Any], message: str, note: str) -> None:
        self.outcome.changes.update(change)
        self.outcome.summary.append(message)
        self.thread.updated_at = self.world.clock()
        self.world.add_comment(
            self.repo.platform,
            self.repo.path,
            self.thread.number,
            note,
            author=self.actor.login,
            kind=self.thread.kind,
            system=True,
        )

    @property
    def noun(self) -> str:
        return "merge request" if self.thread.kind == "mr" else "issue"


def _close(ctx: _Context, _arg: str) -> None:
    if ctx.thread.state == "open" and ctx.can_update():
        ctx.thread.state = "closed"
        ctx.done({"state_event": "close"}, f"Closed this {ctx.noun}.", "closed")


def _reopen(ctx: _Context, _arg: str) -> None:
    if ctx.thread.state == "closed" and ctx.can_update():
        ctx.thread.state = "open"
        ctx.done({"state_event": "reopen"}, f"Reopened this {ctx.noun}.", "reopened")


def _title(ctx: _Context, arg: str) -> None:
    if arg and ctx.can_update():
        old, ctx.thread.title = ctx.thread.title, arg
        ctx.done({"title": arg}, f'Changed the title to "{arg}".', f"changed title from {old}")


def _label(ctx: _Context, arg: str) -> None:
    names = _labels(arg)
    if names and ctx.rank() >= REPORTER:
        for name in names:  # a resource label event by the note's author, as GitLab records
            if name not in ctx.thread.labels:
                ctx.world.record_event(ctx.thread, "labeled", name, ctx.actor)
        ctx.thread.labels = list(dict.fromkeys([*ctx.thread.labels, *names]))
        listed = " ".join(f"~{n}" for n in names)
        ctx.done({"add_label_ids": names}, f"Added {listed} label.", f"added {listed} label")


def _unlabel(ctx: _Context, arg: str) -> None:
    if not ctx.thread.labels or ctx.rank() < REPORTER:
        return
    names = _labels(arg) or list(ctx.thread.labels)
    for name in names:
        if name in ctx.thread.labels:
            ctx.world.record_event(ctx.thread, "unlabeled", name, ctx.actor)
    ctx.thread.labels = [n for n in ctx.thread.labels if n not in names]
    listed = " ".join(f"~{n}" for n in names)
    ctx.done({"remove_label_ids": names}, f"Removed {listed} label.", f"removed {listed} label")


def _assign(ctx: _Context, arg: str) -> None:
    users = _users(ctx, arg)
    if users and ctx.rank() >= REPORTER:
        known = {u.login for u in ctx.thread.assignees}
        ctx.thread.assignees += [u for u in users if u.login not in known]
        for user in users:
            ctx.world.record_event(ctx.thread, "assigned", user.login, ctx.actor)
        listed = " ".join(f"@{u.login}" for u in users)
        ctx.done(
            {"assignee_ids": [u.id for u in users]}, f"Assigned {listed}.", f"assigned to {listed}"
        )


def _unassign(ctx: _Context, arg: str) -> None:
    if not ctx.thread.assignees or ctx.rank() < REPORTER:
        return
    users = _users(ctx, arg) or list(ctx.thread.assignees)
    gone = {u.login for u in users}
    ctx.thread.assignees = [u for u in ctx.thread.assignees if u.login not in gone]
    listed = " ".join(f"@{u.login}" for u in users)
    ctx.done({"assignee_ids": []}, f"Removed assignee {listed}.", f"unassigned {listed}")


def _lock(ctx: _Context, _arg: str) -> None:
    if not ctx.thread.locked and ctx.rank() >= REPORTER:
        ctx.thread.locked = True
        ctx.done({"discussion_locked": True}, "Locked the discussion.", "locked the discussion")


def _unlock(ctx: _Context, _arg: str) -> None:
    if ctx.thread.locked and ctx.rank() >= REPORTER:
        ctx.thread.locked = False
        ctx.done({"discussion_locked": False}, "Unlocked the discussion.", "unlocked")


def _merge(ctx: _Context, _arg: str) -> None:
    thread, repo = ctx.thread, ctx.repo
    if thread.kind != "mr" or thread.state != "open" or ctx.rank() < DEVELOPER:
        return
    draft = thread.change.draft if thread.change else thread.title.lower().startswith("draft:")
    if draft or not ctx.head_sha or ctx.head_sha != thread.head_sha:
        return
    head, target = repo.branches.get(thread.head_ref), repo.branches.get(thread.base_ref)
    if head is None or target is None:
        return
    files = dict(repo.commits[head].files)
    message = f"Merge branch '{thread.head_ref}' into '{thread.base_ref}'"
    repo.branches[thread.base_ref] = repo.commit(
        files, message, [target, head], ctx.actor.login
    ).sha
    thread.state = "merged"
    ctx.done({"merge": thread.head_sha}, "Merged this merge request.", "merged")


def _approve(ctx: _Context, _arg: str) -> None:
    thread = ctx.thread
    if (
        thread.kind == "mr"
        and ctx.rank() >= DEVELOPER
        and ctx.actor.login not in thread.approved_by
    ):
        thread.approved_by.append(ctx.actor.login)
        ctx.done(
            {"approve": True}, "Approved the current merge request.", "approved this merge request"
        )


def _unapprove(ctx: _Context, _arg: str) -> None:
    if ctx.actor.login in ctx.thread.approved_by:
        ctx.thread.approved_by.remove(ctx.actor.login)
        ctx.done({"unapprove": True}, "Unapproved the current merge request.", "unapproved")


def _labels(arg: str) -> list[str]:
    """`~foo ~"bar baz"` (the tilde optional), as the label reference parser takes them."""
    try:
        words = shlex.split(arg.replace('~"', '"'))
    except ValueError:
        words = arg.split()
    return [w.removeprefix("~") for w in words if w.removeprefix("~")]


def _users(ctx: _Context, arg: str) -> list[SUser]:
    found = []
    for word in arg.replace(",", " ").split():
        login = ctx.actor.login if word == "me" else word.removeprefix("@")
        user = ctx.world.users.get(login)
        if user is not None:
            found.append(user)
    return found


_ACTIONS: dict[str, Callable[[_Context, str], None]] = {
    "close": _close,
    "reopen": _reopen,
    "title": _title,
    "label": _label,
    "labels": _label,
    "unlabel": _unlabel,
    "remove_label": _unlabel,
    "assign": _assign,
    "unassign": _unassign,
    "lock": _lock,
    "unlock": _unlock,
    "merge": _merge,
    "approve": _approve,
    "unapprove": _unapprove,
}
