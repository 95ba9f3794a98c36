"""The agent runs commands: a `run_command` tool, and the repository's checks before publishing.

One `CommandSession` per task run owns the working copy (the pinned snapshot with the task's
changeset applied, made on first use) and runs every command in the jail. The setup commands
run once, before the first command, with a network of their own (never the host's) only when
the configuration allows it and the head is trusted: code from an untrusted head never gets
one, whatever the configuration says. Checks and `run_command` never get a network.
Files a command changes are folded back into the changeset through the workspace, so its
rules (protected paths, left-out files, size limits) hold for them as for the file tools.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import Field

from bot.agent.tools import Args, Tool, ToolResult
from bot.context.budget import truncate
from bot.context.render import UNTRUSTED_CODE, quote
from bot.context.tokens import TokenCounter
from bot.core.config import RepoChecks
from bot.core.log import get_logger
from bot.jail import CommandResult, Jail, WorkCopy
from bot.jail.workcopy import Fold
from bot.llm.base import ToolCall
from bot.repo.workspace import HIDDEN, Workspace, WorkspaceError

log = get_logger(__name__)
OUTPUT_CHARS = 6000  # of a command's output, before the tool-result budget cuts further
DIFF_LINES = 80
LAST_LINES = 15  # of a check's output in the request body


class RunCommandArgs(Args):
    command: str = Field(min_length=1, max_length=2000, description="shell command line")


@dataclass
class CheckReport:
    command: str
    outcome: str
    ok: bool
    duration: float
    last_lines: str


@dataclass
class CommandSession:
    jail: Jail
    workspace: Workspace
    checks: RepoChecks
    # Whether the pinned commit's code is trusted (the rule of the instruction files: the
    # default branch, or a request by someone with write access; no default: nothing
    # trusts a head unless its caller decided so). Untrusted code never gets a network,
    # and what it prints reaches the model quoted under the untrusted mark
    # (docs/architecture.md, invariant 14).
    head_trusted: bool
    _work: WorkCopy | None = None
    setup_results: list[CommandResult] = field(default_factory=list)

    def run(self, command: str, *, network: bool = False) -> tuple[CommandResult, Fold]:
        work = self._ready()
        work.sync(self.workspace.changes)
        result = self.jail.run(command, work, network=network)
        fold = work.collect(self.workspace.changes)
        log.info(
            "command_ran",
            outcome=result.outcome,
            duration=round(result.duration, 2),
            changed=len(fold.changes),
        )
        return result, fold

    def run_checks(self) -> list[CheckReport]:
        reports = []
        for command in self.checks.checks:
            result, _fold = self.run(command)  # checks' own writes are not work to publish
            reports.append(
                CheckReport(
                    command, result.outcome, result.ok, result.duration, _last_lines(result)
                )
            )
        return reports

    def close(self) -> None:
        if self._work is not None:
            self._work.remove()
            self._work = None

    def work_copy(self) -> WorkCopy:
        """The run's working copy (made, and set up, on first use), for a jailed MCP server
        that works over it (`working_copy: true`, mounted read-only)."""
        work = self._ready()
        work.sync(self.workspace.changes)
        return work

    def _ready(self) -> WorkCopy:
        if self._work is None:
            ws = self.workspace
            self._work = self.jail.work_copy(
                ws.snapshot_root(), ws.changes, ws.links(), ws.executables(), HIDDEN
            )
            network = self._setup_network()
            for command in self.checks.setup:
                result = self.jail.run(command, self._work, network=network)
                self.setup_results.append(result)
                log.info("setup_ran", outcome=result.outcome, duration=round(result.duration, 2))
            self._work.collect(ws.changes)  # what setup installs is environment, not changes
        return self._work

    def _setup_network(self) -> bool:
        if self.checks.setup_network and self.checks.setup and not self.head_trusted:
            log.warning("setup_network_refused", reason="untrusted_head")
            return False
        return self.checks.setup_network


def run_command_tool(session: CommandSession, counter: TokenCounter, budget: int) -> Tool:
    def run(args: RunCommandArgs, _call: ToolCall) -> ToolResult:
        result, fold = session.run(args.command)
        folded = fold_into(session.workspace, fold)
        text = describe(result, folded, trusted=session.head_trusted)
        return ToolResult(truncate(text, budget, counter), ok=result.ok, outcome=result.outcome)

    return Tool(
        "run_command",
        "Run a shell command in the repository (no network). Files it changes become your changes.",
        RunCommandArgs,
        run,
    )


@dataclass
class Folded:
    diffs: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def fold_into(workspace: Workspace, fold: Fold) -> Folded:
    """Apply what a command changed to the changeset, each file through the workspace rules."""
    out = Folded(refused=list(fold.skipped))
    for rel, content in sorted(fold.changes.items()):
        before = _current(workspace, rel)
        try:
            if content is None:
                workspace.check_changeable(rel)
                workspace.changes[rel] = None
            else:
                workspace.write(rel, content)
        except WorkspaceError as exc:
            out.refused.append(f"{rel}: {exc}")
            continue
        out.diffs.append(_diff(rel, before, content))
    return out


def describe(result: CommandResult, folded: Folded, *, trusted: bool) -> str:
    """A command's result for the model. Over untrusted code, everything the code controls
    (its output, the files it wrote, their names) is quoted under the untrusted mark, after
    our own lines: no line of it can pass for the bot's framing."""
    parts = [f"$ {result.command}", f"{result.outcome} in {result.duration:.1f} s"]
    if not trusted:
        parts.append(UNTRUSTED_CODE)
    show: Callable[[str], str] = quote if not trusted else str
    output = result.output(OUTPUT_CHARS).rstrip()
    quoted = "" if trusted else ", quoted"
    if output:
        parts.append(f"output ({result.output_bytes} bytes){quoted}:\n{show(output)}")
    else:
        parts.append("no output")
    if folded.diffs:
        parts.append(f"files changed by the command (now part of your changes){quoted}:")
        parts += [show(diff) for diff in folded.diffs]
    if folded.refused:
        parts.append(f"not taken into your changes{quoted}:\n" + show("\n".join(folded.refused)))
    return "\n".join(parts)


def checks_markdown(reports: list[CheckReport] | None, enabled: bool) -> str:
    """The request body's and final comment's account of the checks."""
    if not enabled:
        return "Checks: not run (running commands is not enabled for this bot)."
    if not reports:
        return "Checks: none configured for this repository."
    lines = ["Checks:", ""]
    for r in reports:
        mark = "passed" if r.ok else r.outcome
        lines.append(f"- `{r.command}`: {mark} ({r.duration:.1f} s)")
        if r.last_lines:
            lines += ["", "  ```", *(f"  {x}" for x in r.last_lines.splitlines()), "  ```"]
    return "\n".join(lines)


def failing(reports: list[CheckReport]) -> list[CheckReport]:
    return [r for r in reports if not r.ok]


@dataclass(frozen=True)
class CheckRound:
    text: str  # appended to the final answer (and so to the request body)
    again: bool = False  # the checks failed and the model gets another turn to fix them
    ran: bool = False  # commands ran (time passed: the thread may have moved on)


def fix_request(reports: list[CheckReport], *, trusted: bool) -> str:
    """What the model is told when the checks fail on its final changeset: our own words,
    with what the checks printed quoted inside them when the code is not trusted."""
    lines = ["The repository's checks failed on your changes. Fix them, then finish again."]
    if not trusted:
        lines.append(UNTRUSTED_CODE)
    for r in failing(reports):
        lines += ["", f"$ {r.command}", r.outcome, r.last_lines if trusted else quote(r.last_lines)]
    return "\n".join(lines)


def _current(workspace: Workspace, rel: str) -> str | None:
    try:
        return workspace.text(rel)
    except WorkspaceError:
        return None


def _diff(rel: str, before: str | None, after: str | None) -> str:
    lines = list(
        difflib.unified_diff(
            (before or "").splitlines(),
            (after or "").splitlines(),
            f"a/{rel}" if before is not None else "/dev/null",
            f"b/{rel}" if after is not None else "/dev/null",
            lineterm="",
        )
    )
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... ({len(lines) - DIFF_LINES} more diff lines)"]
    return "\n".join(lines)


def _last_lines(result: CommandResult) -> str:
    text = result.output(4000).rstrip()
    return "\n".join(text.splitlines()[-LAST_LINES:]).replace("```", "'''")
