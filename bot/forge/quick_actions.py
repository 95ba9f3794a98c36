"""Neutralise GitLab quick actions in text the bot writes.

GitLab runs a line of a note or an issue/merge request description as a quick action, with the
poster's rights, when the line starts with `/` and a command name: "Each command starts with a
forward slash (/) and must be entered on a separate line"
(https://docs.gitlab.com/user/project/quick_actions/). Its extractor
(`lib/gitlab/quick_actions/extractor.rb`) first deletes every `\\r`, then matches
`^\\/(?<cmd>close|merge|...)` case-insensitively; so the slash must be the line's first
character once carriage returns are gone.

The bot's texts are written by the model, which outsiders' quoted text can steer, so every
such line gets a backslash before its slash. In Markdown `\\/` is an escaped `/` (CommonMark:
any ASCII punctuation may be backslash-escaped), so the line reads the same, and GitLab's
pattern no longer matches because the line now starts with `\\`.

Why not rely on GitLab skipping code blocks: its extractor does skip ```` ``` ```` fences,
`>>>` quotes and HTML blocks, but by regular expression, not by Markdown parsing, and the rules
differ between GitLab versions. `~~~` fences are never skipped; and in extractors without the
later `inline_code` branch, an HTML block whose closing tag sits inside a ```` ``` ```` block
ends the match there, so `<div>`, text, ```` ``` ````, `</div>`, `/close`, ```` ``` ```` runs
`/close` although Markdown shows it as code. Escaping every command-like line is the one rule
that holds for every version; the cost is a visible backslash on a code line that starts with
`/word`.

Command names are letters, digits and underscores, matched case-insensitively (Unicode case
folding included, e.g. the Kelvin sign folds to `k`), so a line counts when the character
after the slash is anything but whitespace, `/` or `*` (which keeps `//` and `/*` code
comments untouched). Idempotent: an escaped line starts with `\\` and is left alone.
"""

from __future__ import annotations

from typing import Any

# Request fields GitLab reads quick actions from: notes and discussions (`body`), draft and
# commit notes (`note`), issue / merge request / epic descriptions (`description`).
TEXT_FIELDS = ("body", "note", "description")
_NOT_A_NAME = frozenset("/*")


def neutralise(text: str) -> str:
    """`text` with a backslash before the slash of every line GitLab could run."""
    if "/" not in text:
        return text
    return "\n".join(_line(line) for line in text.split("\n"))


def _line(line: str) -> str:
    visible = line.replace("\r", "")  # GitLab deletes \r before matching
    if len(visible) < 2 or visible[0] != "/":
        return line
    second = visible[1]
    if second.isspace() or second in _NOT_A_NAME:
        return line
    slash = line.index("/")  # only \r can precede it
    return f"{line[:slash]}\\{line[slash:]}"


def neutralise_payload(data: Any) -> Any:
    """A request body with its quick-action-bearing text fields neutralised (a copy)."""
    if not isinstance(data, dict):
        return data
    changed = {
        key: neutralise(value)
        for key, value in data.items()
        if key in TEXT_FIELDS and isinstance(value, str)
    }
    return {**data, **changed} if changed else data
