"""A changeset as a patch that `git apply` takes, for a thread the bot may not push to."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping

from bot.core.markdown import code_span, fence_for

MAX_PATCH_CHARS = 40_000  # GitHub refuses comments over 65,536 characters
_NO_NEWLINE = "\\ No newline at end of file"


def render_patch(changes: Mapping[str, str | None], original: Callable[[str], bytes | None]) -> str:
    """Every changed file as a git-style diff against `original(path)` (None: absent)."""
    parts = []
    for path, content in sorted(changes.items()):
        before = original(path)
        old = None if before is None else before.decode("utf-8", errors="replace")
        if old == content:
            continue
        parts.append(_file_diff(path, old, content))
    return "".join(parts)


def patch_section(patch: str, why: str) -> str:
    """The final comment's account of a change that was not pushed."""
    intro = f"\n\nI did not push anything: {why}."
    if not patch:
        return intro
    if len(patch) > MAX_PATCH_CHARS:
        files = [line[len("+++ b/") :] for line in patch.splitlines() if line.startswith("+++ b/")]
        listed = "\n".join(f"- {code_span(f)}" for f in files)
        return (
            f"{intro} My change is too long for a comment ({len(patch.splitlines())} patch "
            f"lines); it changes:\n{listed}"
        )
    fence = fence_for(patch)
    return (
        f"{intro} My change, as a patch (save it and run `git apply` on the request's "
        f"branch):\n\n<details><summary>Patch</summary>\n\n{fence}diff\n{patch}{fence}\n\n"
        "</details>"
    )


def _file_diff(path: str, old: str | None, new: str | None) -> str:
    header = [f"diff --git a/{path} b/{path}"]
    if old is None:
        header.append("new file mode 100644")
    elif new is None:
        header.append("deleted file mode 100644")
    source = "/dev/null" if old is None else f"a/{path}"
    target = "/dev/null" if new is None else f"b/{path}"
    body = []
    # Header lines end with `lineterm`; content lines keep their own ending, so a line without
    # one is a file's last line with no newline, which git marks on a line of its own.
    for line in difflib.unified_diff(_lines(old), _lines(new), source, target, lineterm="\n"):
        body.append(line if line.endswith("\n") else f"{line}\n{_NO_NEWLINE}\n")
    return "\n".join(header) + "\n" + "".join(body)


def _lines(text: str | None) -> list[str]:
    return [] if text is None else text.splitlines(keepends=True)
