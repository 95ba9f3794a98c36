"""GitLab internal notes stay internal everywhere, with the real python-gitlab (and PyGithub)
client against the emulator: a file carrying a note's text is never committed, and look-alikes
of a note (zero-width characters, full-width letters, ...) are withheld from every post, the
request description and the commit message."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

import pytest

from bot.task.confidential import WITHHELD
from bot_sandbox.world import SRepo, SThread
from tests.conftest import REPO
from tests.rig import Rig
from tests.test_agent_e2e import call, scripted

SECRET = "Customer ACME pays 40k a year and says they will leave in March"
# Pieces of the note a leak would carry; none of them is ordinary text of these tests.
PIECES = ("acme pays 40k", "they will leave in march")
DONE, FAILED = "coding agent done", "coding agent failed"
ZWSP = "\u200b"


def readable(text: str) -> str:
    """What a reader sees: compatibility forms folded, invisible characters and combining
    marks gone, entities decoded, case and whitespace evened out. The tests' own reading,
    independent of the one in bot/task/confidential.py."""
    text = re.sub(r"&#(\d+);", lambda m: chr(int(m.group(1))), text)
    text = unicodedata.normalize("NFKD", text)
    kept = "".join(c for c in text if unicodedata.category(c)[0] not in "CM" or c.isspace())
    return " ".join(kept.casefold().split())


def leaks(text: str) -> bool:
    return any(piece in readable(text) for piece in PIECES)


def every_eighth(text: str, mark: str = ZWSP) -> str:
    return mark.join(text[i : i + 8] for i in range(0, len(text), 8))


def full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" for c in text)


def math_bold(text: str) -> str:
    def bold(c: str) -> str:
        if "A" <= c <= "Z":
            return chr(0x1D400 + ord(c) - ord("A"))
        if "a" <= c <= "z":
            return chr(0x1D41A + ord(c) - ord("a"))
        return c

    return "".join(bold(c) for c in text)


def combining(text: str) -> str:
    return "".join(c + "\u0336" if c.isalnum() else c for c in text)  # a strike-through


def entities(text: str) -> str:
    return "".join(f"&#{ord(c)};" for c in text)


def soft_hyphens_and_bidi(text: str) -> str:
    marks = ["\u00ad", "\u2060", "\u202e", "\u2066", "\ufeff", "\u200d"]
    return "".join(c + marks[i % len(marks)] for i, c in enumerate(text))


def world_text(repo: SRepo) -> list[str]:
    """Everything anyone who can read the project (without being a member) can read."""
    texts = list(repo.branches)
    for commit in repo.commits.values():
        texts.append(commit.message)
        texts += list(commit.files)
        texts += [data.decode("utf-8", "replace") for data in commit.files.values()]
    for thread in repo.threads.values():
        texts += [thread.title, thread.body]
        texts += [c.body for c in thread.comments if not c.internal]
        if thread.change is not None:
            texts += [thread.change.title, thread.change.body]
    return texts


def gitlab_issue(rig: Rig) -> SThread:
    thread = rig.issue(title="Say hello", body="src/app.py should print hello instead of hi.")
    rig.forge.world.add_internal_note(REPO, thread.number, SECRET, kind="issue")
    return thread


EDIT = call("edit_file", path="src/app.py", old="print('hi')", new="print('hello')")


# -- a changeset carrying a note's text is refused -------------------------------------------


@pytest.mark.parametrize("platform", ["gitlab"])
@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("docs/customers.md", f"# Notes\n\n{SECRET}\n"),
        ("docs/customers.md", f"# Notes\n\n{every_eighth(SECRET)}\n"),
        ("src/app.py", f"print('hello')\n# {SECRET[:30]}\n# {SECRET[30:].upper()}\n"),
    ],
    ids=["plain", "zero-width", "code-comments"],
)
def test_a_file_carrying_an_internal_note_is_not_published(
    rig: Rig, path: str, content: str
) -> None:
    thread = gitlab_issue(rig)
    rig.model.policy = scripted(
        EDIT,
        call("write_file", path=path, content=content),
        call("write_file", path="docs/CHANGES.md", content="- greet with hello\n"),
        call("finish", summary="Printed hello and wrote the notes down."),
    )
    rig.run_once()
    repo = rig.forge.world.repo("gitlab", REPO)
    assert list(repo.branches) == ["main"]  # no branch, so no commit and no merge request
    assert all(t.change is None for t in repo.threads.values())
    assert thread.labels == [FAILED]
    last = rig.bot_comments(thread)[-1]
    assert f"`{path}`" in last and "nothing was published" in last
    assert "docs/CHANGES.md" not in last  # only the files that carry the note are named
    assert not any(leaks(text) for text in world_text(repo))
    assert rig.state(thread).commit_sha is None


@pytest.mark.parametrize("platform", ["gitlab"])
def test_a_file_named_after_an_internal_note_is_refused_without_naming_it(rig: Rig) -> None:
    thread = gitlab_issue(rig)
    name = "docs/" + re.sub(r"\W+", "-", SECRET.lower()) + ".md"
    rig.model.policy = scripted(
        EDIT,
        call("write_file", path=name, content="hello\n"),
        call("finish", summary="Printed hello."),
    )
    rig.run_once()
    repo = rig.forge.world.repo("gitlab", REPO)
    assert list(repo.branches) == ["main"] and thread.labels == [FAILED]
    last = rig.bot_comments(thread)[-1]
    assert WITHHELD in last and "nothing was published" in last
    assert not any(leaks(text.replace("-", " ")) for text in world_text(repo))


@pytest.mark.parametrize("platform", ["gitlab"])
def test_a_note_quoting_the_repository_does_not_stop_the_work(rig: Rig) -> None:
    line = "def compute_invoice_total(customer, items, discount):"
    old = f"{line}\n    return sum(items)\n"
    rig.forge.world.push("gitlab", REPO, "main", {"src/billing.py": old}, "billing")
    thread = rig.issue(title="Apply discounts", body="Invoices ignore the discount.")
    note = f"ACME complained: `{line}` ignores their discount, they may leave"
    rig.forge.world.add_internal_note(REPO, thread.number, note, kind="issue")
    new = "return sum(items) * (1 - discount)"
    rig.model.policy = scripted(
        call("edit_file", path="src/billing.py", old="return sum(items)", new=new),
        call("finish", summary="Invoices apply the discount now."),
    )
    rig.run_once()
    assert thread.labels == [DONE], rig.bot_comments(thread)
    files = rig.forge.world.repo("gitlab", REPO).files(f"bot/{thread.number}-apply-discounts")
    assert files is not None and files["src/billing.py"] == f"{line}\n    {new}\n".encode()


# -- look-alikes of a note are withheld wherever the bot writes -------------------------------


@pytest.mark.parametrize("platform", ["gitlab"])
@pytest.mark.parametrize(
    "disguise",
    [every_eighth, full_width, math_bold, combining, entities, soft_hyphens_and_bidi],
    ids=lambda f: f.__name__,
)
def test_look_alikes_of_an_internal_note_are_withheld_everywhere(
    rig: Rig, disguise: Callable[[str], str]
) -> None:
    thread = gitlab_issue(rig)
    hidden = disguise(SECRET)
    assert leaks(hidden)  # the disguise still reads as the note
    rig.model.policy = scripted(
        call("update_plan", items=[{"text": f"Keep in mind: {hidden}"}]),
        call("update_plan", items=[{"text": f"Still: {hidden}", "done": True}]),  # an edit
        call("post_comment", body=f"FYI {hidden}"),
        EDIT,
        call("finish", summary=f"Printed hello. Plain: {SECRET}. Hidden: {hidden}. Bye."),
    )
    rig.run_once()
    repo = rig.forge.world.repo("gitlab", REPO)
    assert thread.labels == [DONE]
    mrs = [t for t in repo.threads.values() if t.change is not None]
    assert len(mrs) == 1 and mrs[0].change is not None
    body = mrs[0].change.body
    assert body.startswith(f"Closes #{thread.number}\n\nPrinted hello. Plain: {WITHHELD}.")
    final = rig.bot_comments(thread)[-1]
    assert final.startswith(f"Printed hello. Plain: {WITHHELD}. Hidden: ")
    assert "Bye." in final and "Bye." in body
    assert not any(leaks(text) for text in world_text(repo))


# -- GitHub: no internal comments, nothing to withhold ----------------------------------------


@pytest.mark.parametrize("platform", ["github"])
def test_on_github_the_same_task_is_published_untouched(rig: Rig) -> None:
    thread = rig.issue(title="Say hello", body="src/app.py should print hello instead of hi.")
    rig.comment(thread, SECRET)  # a public comment: GitHub has no internal ones
    hidden = every_eighth(SECRET)
    content = f"# Notes\n\n{SECRET}\n"
    rig.model.policy = scripted(
        EDIT,
        call("write_file", path="docs/customers.md", content=content),
        call("finish", summary=f"Printed hello. Plain: {SECRET}. Hidden: {hidden}."),
    )
    rig.run_once()
    repo = rig.forge.world.repo("github", REPO)
    assert thread.labels == [DONE]
    files = repo.files(f"bot/{thread.number}-say-hello")
    assert files is not None and files["docs/customers.md"] == content.encode()
    final = rig.bot_comments(thread)[-1]
    assert final.startswith(f"Printed hello. Plain: {SECRET}. Hidden: {hidden}.")
    assert WITHHELD not in final
