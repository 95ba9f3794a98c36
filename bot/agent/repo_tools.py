"""Repository tools: list, read, search, write, edit. Output is budgeted by the context engine."""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import PurePosixPath
from typing import TypeVar

import regex
from pydantic import Field

from bot.agent.tools import Args, Tool, ToolResult
from bot.context.budget import truncate
from bot.context.render import UNTRUSTED_FILES, framed
from bot.context.tokens import TokenCounter
from bot.core.clock import SYSTEM_CLOCK, Clock
from bot.core.markdown import fence_for
from bot.llm.base import ToolCall
from bot.repo.workspace import Workspace, WorkspaceError, is_binary

MAX_SEARCH_FILES = 40
MAX_HITS_PER_FILE = 8
MAX_LINE_CHARS = 200
MAX_SEARCH_BYTES = 1024 * 1024
DIR_ENTRIES = 30
# Patterns are written by the model: a backtracking blow-up such as `(a+)+$` must cost a tool
# error, not the worker. `regex` checks its timeout while matching (stdlib `re` cannot be
# interrupted); one line gets at most LINE_SECONDS, the whole search SEARCH_SECONDS.
LINE_SECONDS = 0.25
SEARCH_SECONDS = 10.0


class ListFilesArgs(Args):
    path: str = Field(default=".", description="directory relative to the repository root")
    depth: int = Field(default=2, ge=1, le=6, description="how many directory levels to show")


class ReadFileArgs(Args):
    path: str = Field(description="file relative to the repository root")
    start_line: int = Field(default=1, ge=1)
    end_line: int | None = Field(default=None, ge=1, description="inclusive; default: to the end")


class SearchCodeArgs(Args):
    pattern: str = Field(min_length=1, max_length=300, description="Python regular expression")
    path_glob: str = Field(default="**", max_length=200, description="e.g. src/**/*.py")


class WriteFileArgs(Args):
    path: str
    content: str = Field(max_length=1_000_000)


class EditFileArgs(Args):
    path: str
    old: str = Field(min_length=1, description="exact text to replace; must occur once")
    new: str


A = TypeVar("A", bound=Args)


def repo_tools(
    workspace: Workspace,
    counter: TokenCounter,
    budget: int,
    *,
    trusted: bool,
    clock: Clock = SYSTEM_CLOCK,
) -> list[Tool]:
    """`budget`: the most tokens one tool result may take. `trusted`: whether the repository
    is trusted code; when it is not (a request's head by an author without write access),
    what the reading tools show of it is quoted under the untrusted mark
    (docs/architecture.md, invariant 14: a file its code wrote is what it printed, by another
    way). `clock`: the search's deadline."""

    def guarded(
        fn: Callable[[Workspace, A], str], reads: bool = False
    ) -> Callable[[A, ToolCall], ToolResult]:
        def run(args: A, _call: ToolCall) -> ToolResult:
            try:
                text = fn(workspace, args)
            except WorkspaceError as exc:
                return ToolResult(str(exc), ok=False)
            if reads and not trusted:
                text = framed(UNTRUSTED_FILES, text)
            return ToolResult(truncate(text, budget, counter))

        return run

    return [
        Tool(
            "list_files",
            "List files with sizes under a directory.",
            ListFilesArgs,
            guarded(list_files, reads=True),
        ),
        Tool(
            "read_file",
            "Read a text file with line numbers.",
            ReadFileArgs,
            guarded(read_file, reads=True),
        ),
        Tool(
            "search_code",
            "Search file contents with a regular expression.",
            SearchCodeArgs,
            guarded(partial(search_code, clock=clock), reads=True),
        ),
        Tool(
            "write_file",
            "Create or replace a file (the change goes into the task's changeset).",
            WriteFileArgs,
            guarded(write_file),
        ),
        Tool(
            "edit_file",
            "Replace one exact occurrence of `old` with `new` in a file.",
            EditFileArgs,
            guarded(edit_file),
        ),
    ]


def write_file(workspace: Workspace, args: WriteFileArgs) -> str:
    return f"wrote {workspace.write(args.path, args.content)} ({len(args.content.encode())} bytes)"


def edit_file(workspace: Workspace, args: EditFileArgs) -> str:
    return f"edited {workspace.edit(args.path, args.old, args.new)}"


def list_files(workspace: Workspace, args: ListFilesArgs) -> str:
    base = workspace.normalize(args.path)
    prefix = f"{base}/" if base else ""
    children: dict[str, list[tuple[str, int]]] = defaultdict(list)
    found = False
    for entry in workspace.files():
        if not entry.path.startswith(prefix):
            continue
        found = True
        parts = PurePosixPath(entry.path[len(prefix) :]).parts
        for level in range(min(len(parts), args.depth)):
            parent = "/".join(parts[:level])
            name = parts[level] + ("/" if level < len(parts) - 1 else "")
            children[parent].append((name, entry.size if level == len(parts) - 1 else 0))
    left_out = workspace.left_out_under(prefix)
    if not found and not left_out:
        raise WorkspaceError(f"error: no directory {args.path!r}")
    lines = [f"{base or '.'}/"]
    _render(children, "", 1, lines)
    if left_out:  # they exist: the model must not take them for absent
        shown = ", ".join(left_out[:20]) + (", ..." if len(left_out) > 20 else "")
        lines.append(
            f"({len(left_out)} more files exist but are left out of the snapshot, over its "
            f"size limits; they cannot be read or changed: {shown})"
        )
    return "\n".join(lines)


def _render(
    children: dict[str, list[tuple[str, int]]], parent: str, indent: int, lines: list[str]
) -> None:
    entries: dict[str, int] = {}
    for name, size in children.get(parent, []):
        entries[name] = entries.get(name, 0) + size
    names = sorted(entries, key=lambda n: (not n.endswith("/"), n))
    for name in names[:DIR_ENTRIES]:
        label = "" if name.endswith("/") else f" ({entries[name]} B)"
        lines.append(f"{'  ' * indent}{name}{label}")
        if name.endswith("/"):
            _render(children, f"{parent}/{name[:-1]}".lstrip("/"), indent + 1, lines)
    if len(names) > DIR_ENTRIES:
        lines.append(f"{'  ' * indent}(+{len(names) - DIR_ENTRIES} more)")


def read_file(workspace: Workspace, args: ReadFileArgs) -> str:
    data = workspace.read(args.path)
    if is_binary(data):
        raise WorkspaceError(f"error: {args.path} is a binary file ({len(data)} bytes); not shown")
    lines = data.decode("utf-8", errors="replace").splitlines()
    end = min(args.end_line or len(lines), len(lines))
    if args.start_line > max(len(lines), 1):
        raise WorkspaceError(
            f"error: {args.path} has {len(lines)} lines; start_line is past the end"
        )
    width = len(str(end))
    body = [f"{n:>{width}}| {lines[n - 1]}" for n in range(args.start_line, end + 1)]
    return (
        f"{workspace.normalize(args.path)} (lines {args.start_line}-{end} of {len(lines)})\n"
        + "\n".join(body)
    )


def search_code(workspace: Workspace, args: SearchCodeArgs, clock: Clock = SYSTEM_CLOCK) -> str:
    try:
        compiled = regex.compile(args.pattern)
    except (regex.error, OverflowError, RecursionError) as exc:
        raise WorkspaceError(f"error: bad regular expression: {exc}") from None
    deadline = clock.monotonic() + SEARCH_SECONDS
    results: list[str] = []
    files = 0
    total_hits = 0
    for entry in workspace.files():
        if not _glob(entry.path, args.path_glob) or entry.size > MAX_SEARCH_BYTES:
            continue
        data = workspace.read(entry.path)
        if is_binary(data):
            continue
        hits: dict[str, int] = {}
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
            if _matches(compiled, line, deadline, clock, args.pattern, entry.path, number):
                text = line.strip()[:MAX_LINE_CHARS]
                hits.setdefault(text, number)  # identical lines reported once
        if not hits:
            continue
        files += 1
        total_hits += len(hits)
        if files > MAX_SEARCH_FILES:
            continue
        shown = sorted(hits.items(), key=lambda kv: kv[1])[:MAX_HITS_PER_FILE]
        snippet = "\n".join(f"{n}: {text}" for text, n in shown)
        more = f"\n(+{len(hits) - len(shown)} more matches)" if len(hits) > len(shown) else ""
        fence = fence_for(snippet)
        results.append(f"{entry.path}\n{fence}\n{snippet}\n{fence}{more}")
    if not results:
        return f"no matches for /{args.pattern}/ in {args.path_glob}"
    header = f"{total_hits} matching lines in {files} files"
    if files > MAX_SEARCH_FILES:
        header += f" (showing {MAX_SEARCH_FILES}; narrow path_glob to see the rest)"
    return header + "\n\n" + "\n\n".join(results)


def _matches(
    compiled: regex.Pattern[str],
    line: str,
    deadline: float,
    clock: Clock,
    pattern: str,
    path: str,
    number: int,
) -> bool:
    left = deadline - clock.monotonic()
    try:
        if left <= 0:
            raise TimeoutError
        return compiled.search(line, timeout=min(LINE_SECONDS, left)) is not None
    except TimeoutError:
        why = "one line" if left > LINE_SECONDS else "the whole search"
        raise WorkspaceError(
            f"error: /{pattern}/ took too long on {why} (stopped at {path}:{number}); the"
            " pattern backtracks catastrophically or the search is too wide: simplify it"
            " (avoid nested repetition such as (a+)+) or narrow path_glob"
        ) from None


def _glob(path: str, pattern: str) -> bool:
    if pattern in ("", "**", "**/*", "*"):
        return True
    return fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern.replace("**/", ""))
