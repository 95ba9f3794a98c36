"""Exactly-once bot comments: intent saved, hidden marker, look-up before posting again."""

from __future__ import annotations

from datetime import timedelta

from bot.core.clock import SYSTEM_CLOCK, Clock, parse_time
from bot.core.log import get_logger
from bot.forge.base import Forge
from bot.forge.errors import NotFound
from bot.forge.limits import comment_chars, fit
from bot.model.state import PendingPost, TaskState, now_iso
from bot.model.thread import TaskKey
from bot.store.base import Store
from bot.task.confidential import InternalNotes
from bot.task.record import Events

log = get_logger(__name__)
# The look-up after a crash starts this long before the intent was recorded, for clock skew.
LOOKBACK = timedelta(minutes=10)


def posted_result(comment_id: str) -> str:
    return f"posted comment {comment_id}"


def marker(key: TaskKey, seq: int) -> str:
    return f"<!-- bot:{key}:{seq} -->"


class Poster:
    def __init__(
        self,
        forge: Forge,
        key: TaskKey,
        bot_login: str,
        store: Store,
        state: TaskState,
        internal: InternalNotes | None = None,
        clock: Clock = SYSTEM_CLOCK,
        events: Events | None = None,
    ):
        self.forge = forge
        self.key = key
        self.bot_login = bot_login
        self.store = store
        self.state = state
        self.internal = internal or InternalNotes(forge, key)
        self.clock = clock  # when an intent was recorded: the look-up after a crash starts there
        self.events = events or Events()  # each post on record, after the state that has it

    def show(self, body: str, call_id: str) -> None:
        """The progress comment (`update_plan`): edited in place once posted; editing is
        idempotent, so repeating it after a crash changes nothing."""
        state = self.state
        if state.progress_comment_id is not None:
            text = self.compose(body, marker(self.key, state.progress_seq or 0))
            try:
                self.forge.edit_comment(self.key, state.progress_comment_id, text)
                return
            except NotFound:
                # Someone deleted it: post it anew (replaying the edit would fail forever).
                log.info("progress_comment_reposted", deleted=state.progress_comment_id)
                state.progress_comment_id = None
        self.post("progress", body, call_id)

    def withhold(self, text: str) -> str:
        """`text` without anything quoted from the thread's internal notes: for public posts."""
        return self.internal.withhold(text)

    def compose(self, body: str, tag: str) -> str:
        """The text posted: withheld first (a cut must not undo it), cut to what the forge
        takes, the marker always last (the look-up after a crash finds it there)."""
        return fit(self.withhold(body), tag, comment_chars(self.forge.platform))

    def post(
        self, purpose: str, body: str, call_id: str | None = None, reply_to: str | None = None
    ) -> str:
        """Record the intent, post with a marker, record the result. Returns the comment id."""
        self.intend(purpose, body, call_id, reply_to)
        return self.deliver(look_up=False)

    def intend(
        self, purpose: str, body: str, call_id: str | None = None, reply_to: str | None = None
    ) -> None:
        """Save the intent only; callers that change the status save both in one write."""
        seq = self.state.next_seq
        self.state.next_seq += 1
        self.state.pending_post = PendingPost(
            seq=seq,
            purpose=purpose,
            body=body,
            call_id=call_id,
            reply_to=reply_to,
            created_at=now_iso(clock=self.clock),
        )
        self.store.save(self.state)

    def deliver(self, look_up: bool = True) -> str:
        pending = self.state.pending_post
        if pending is None:
            raise RuntimeError("no pending post")
        tag = marker(self.key, pending.seq)
        found = self._find(tag, pending.created_at) if look_up else None
        if found is None:
            # A reply in a review thread is in the listing `_find` reads too.
            body = self.compose(pending.body, tag)
            found = self.forge.post_comment(self.key, body, reply_to=pending.reply_to).id
        comment_id = found
        self.state.posted[str(pending.seq)] = comment_id
        if pending.call_id is not None:
            self.state.tool_journal[pending.call_id] = posted_result(comment_id)
        if pending.purpose == "progress":  # the one comment update_plan edits from now on
            self.state.progress_comment_id = comment_id
            self.state.progress_seq = pending.seq
        self.state.pending_post = None
        self.store.save(self.state)
        self.events.posted(pending.purpose, pending.seq, comment_id)
        return comment_id

    def _find(self, tag: str, created_at: str) -> str | None:
        since = parse_time(created_at) - LOOKBACK
        for comment in self.forge.list_comments(self.key, since=since):
            # Only the bot's own comments count: a person quoting the marker is not a post.
            # And only where the bot puts it, at the end: a post may quote names from outside
            # (the final comment's "What I did": a path in a fork can read like a marker).
            if comment.author == self.bot_login and comment.body.rstrip().endswith(tag):
                return comment.id
        return None
