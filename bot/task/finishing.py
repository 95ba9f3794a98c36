"""The end of a task that finished: publish the work, then the final answer in the thread."""

from __future__ import annotations

from collections.abc import Callable

from bot.core.config import AgentSettings
from bot.forge.base import Forge
from bot.model.state import Status
from bot.model.thread import Thread
from bot.repo.patch import patch_section
from bot.repo.publish import Published, PublishError, publish
from bot.repo.workspace import Workspace
from bot.task.lifecycle import Lifecycle
from bot.task.outcome import Outcome


def finish(
    forge: Forge,
    thread: Thread,
    lifecycle: Lifecycle,
    workspace: Workspace,
    settings: AgentSettings,
    answer: str,
    *,
    outside: bool,
    report: str = "",
    what_i_did: Callable[[], str] | None = None,
    page: str | None = None,
) -> Outcome:
    """Branch, commit and draft request first (each looked up before it is made), then the
    final comment carrying the answer, the checks' `report` and where the work went; status
    done, labels last. `outside`: the request's head may carry commits by people without write
    access. The report holds what the checks printed: it is not kept as the run's answer, which
    the next run is shown as its previous summary. `what_i_did` gives the collapsed account
    of the run that ends the comment (bot/task/report.py), read once the publication is on
    record; like everything the comment says, it passes `Poster.withhold` when posted. `page`:
    the task page's address (`ui.public_url`), linked before that section."""
    answer = lifecycle.poster.withhold(answer)  # it goes into the request and commit too
    lifecycle.state.final_answer = answer
    answer += lifecycle.poster.withhold(report)
    # Files are published whole, so one carrying an internal note's text is not published.
    refused = lifecycle.poster.internal.refusal(lifecycle.state.changes, workspace.snapshot_bytes)
    if refused is not None:
        return lifecycle.fail(refused)
    try:
        published = publish(
            forge,
            thread,
            lifecycle.state,
            workspace,
            settings,
            lifecycle.save,
            answer,
            outside=outside,
        )
    except PublishError as exc:  # a conflict with someone's push: stop, name it
        return lifecycle.fail(str(exc))
    if published is not None:
        lifecycle.events.published(published)
    details = what_i_did() if what_i_did is not None else ""
    link = f"\n\nEvery step, with tokens and cost: {page}" if page else ""
    lifecycle.end(Status.DONE, answer + where(published) + link + details)
    return Outcome.DONE


def where(published: Published | None) -> str:
    if published is None:
        return ""
    if published.commit is None:
        return patch_section(published.patch or "", published.why_patch)
    if published.request_url:
        kind = "Draft change request" if published.draft else "Change request"
        return f"\n\n{kind}: {published.request_url} (branch `{published.branch}`)."
    place = f" in `{published.repo}` (this request's branch)" if published.repo else ""
    return f"\n\nPushed commit {published.commit[:12]} to `{published.branch}`{place}."
