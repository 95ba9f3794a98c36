"""Command line: argument parsing and exit codes only; the work happens in other modules.

Exit codes: 0 success; 1 the daemon could not work (authentication, forge unreachable);
2 invalid configuration or usage.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path

import yaml

from bot.app import Application, ListenError, build_mcp
from bot.context.tokens import TokenCounter, encoding_for
from bot.core import log as logging_setup
from bot.core.clock import SYSTEM_CLOCK
from bot.core.config import ConfigError, Runtime, Settings, load_settings, summary
from bot.core.pricing import shown
from bot.forge.errors import AuthError, ForgeError
from bot.forge.factory import build_sources
from bot.jail.factory import build_jail, jail_problem
from bot.model.thread import TaskKey
from bot.service import show
from bot.service.health import check
from bot.service.notify import Notifier
from bot.service.prune import parse_duration, prune
from bot.store.errors import DatabaseError, StateError
from bot.store.factory import build_store
from bot.task.mcp_run import probe_servers
from bot.task.preview import preview
from bot.task.timeline import TimelineError

EXIT_OK, EXIT_FAILURE, EXIT_CONFIG = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bot", description="Coding agent for GitHub and GitLab")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the daemon")
    run.add_argument("-c", "--config", type=Path, required=True, help="YAML configuration file")
    run.add_argument("--once", action="store_true", help="one discovery cycle, then exit")

    check = commands.add_parser("check-config", help="validate a configuration file")
    check.add_argument("-c", "--config", type=Path, required=True)

    context = commands.add_parser("context", help="show the context plan for a thread")
    context.add_argument("task", help="e.g. github:owner/repo#12 or gitlab:group/proj!7")
    context.add_argument("-c", "--config", type=Path, required=True)
    context.add_argument("--json", action="store_true", help="print the plan as JSON only")

    status = commands.add_parser("status", help="list tasks in the state dir")
    status.add_argument("-c", "--config", type=Path, required=True)

    show_ = commands.add_parser("show", help="a task run's timeline: tokens, durations, cost")
    show_.add_argument("task", help="e.g. github:owner/repo#12 or gitlab:group/proj!7")
    show_.add_argument("-c", "--config", type=Path, required=True)
    show_.add_argument("--run", type=int, default=None, metavar="N", help="an earlier run")
    show_.add_argument("--json", action="store_true", help="the timeline as JSON")
    show_.add_argument(
        "--follow", action="store_true", help="while the task runs, print what it adds"
    )

    prune_ = commands.add_parser("prune", help="remove finished tasks older than a duration")
    prune_.add_argument("-c", "--config", type=Path, required=True)
    prune_.add_argument("--older-than", required=True, metavar="DURATION", help="e.g. 30d, 12h, 2w")
    prune_.add_argument("--dry-run", action="store_true", help="list them, remove nothing")

    db = commands.add_parser("db", help="the PostgreSQL store: schema, import, export")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    migrate = db_commands.add_parser("migrate", help="bring the database's schema up to date")
    migrate.add_argument("-c", "--config", type=Path, required=True)
    import_ = db_commands.add_parser("import", help="copy a state dir's tasks into the database")
    import_.add_argument("-c", "--config", type=Path, required=True)
    import_.add_argument("--from", dest="state_dir", type=Path, required=True, metavar="STATE_DIR")
    export = db_commands.add_parser("export", help="copy the database's tasks into a state dir")
    export.add_argument("-c", "--config", type=Path, required=True)
    export.add_argument("--to", dest="state_dir", type=Path, required=True, metavar="STATE_DIR")

    health = commands.add_parser("healthcheck", help="exit 0 if the daemon is alive and polling")
    health.add_argument("-c", "--config", type=Path, required=True)

    sandbox = commands.add_parser(
        "sandbox", help="the whole product against a local forge and model"
    )
    sandbox.add_argument("--state-dir", type=Path, default=None, help="default: a fresh temp dir")
    sandbox.add_argument(
        "--llm-base-url", default=None, help="a real model, e.g. http://127.0.0.1:11434/v1"
    )
    sandbox.add_argument("--llm-model", default="llama3.1", help="model name with --llm-base-url")
    sandbox.add_argument(
        "--until-done", action="store_true", help="exit when the demo tasks finish"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "check-config":
            return _check_config(args.config)
        if args.command == "sandbox":
            from bot_sandbox.demo import run_demo  # the emulator is never imported in production

            return run_demo(args.state_dir, args.llm_base_url, args.llm_model, args.until_done)
        if args.command == "healthcheck":
            return _healthcheck(load_settings(args.config))
        if args.command == "status":
            return _status(load_settings(args.config))
        if args.command == "show":
            settings = load_settings(args.config)
            return _show(settings, args.task, args.run, args.json, args.follow)
        if args.command == "db":
            return _db(
                load_settings(args.config), args.db_command, getattr(args, "state_dir", None)
            )
        if args.command == "prune":
            return _prune(load_settings(args.config), args.older_than, args.dry_run)
        if args.command == "context":
            return _context(_load(args.config, quiet=True), args.task, args.json)
        settings = _load(args.config)
        problem = jail_problem(settings.jail)
        if problem is not None:
            raise problem
        return run_daemon(settings, once=args.once)
    except ConfigError as exc:
        print(f"bot: invalid configuration: {exc}", file=sys.stderr)
        return EXIT_CONFIG


def _load(path: Path, quiet: bool = False) -> Settings:
    settings = load_settings(path)
    level = "warning" if quiet else settings.log_level
    logging_setup.configure(level, settings.secrets(), stream=sys.stderr if quiet else None)
    return settings


def _context(settings: Settings, ref: str, as_json: bool) -> int:
    try:
        key = TaskKey.parse(ref)
    except ValueError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        sources = build_sources(settings)
    except ForgeError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    source = next((s for s in sources if s.forge.platform is key.platform), None)
    if source is None:
        print(f"bot: {key.platform.value} is not configured", file=sys.stderr)
        return EXIT_CONFIG
    counter = TokenCounter(encoding_for(settings.llm.model, settings.llm.tokenizer))
    try:
        opening = preview(source.forge, key, settings, counter)
    except ForgeError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if as_json:
        print(opening.plan.to_json())
    else:
        print(opening.plan.table())
        print()
        print(opening.text)
    return EXIT_OK


def _check_config(path: Path) -> int:
    settings = load_settings(path)
    problem = jail_problem(settings.jail)
    if problem is not None:
        raise problem
    print(yaml.safe_dump(summary(settings), sort_keys=False, allow_unicode=True), end="")
    launcher = build_mcp(settings, build_jail(settings.jail))
    if launcher is not None:  # each server started once: its tools, or exit 2 naming it
        logging_setup.configure("warning", settings.secrets(), stream=sys.stderr)
        tools = probe_servers(launcher)
        print(yaml.safe_dump({"mcp_tools": tools}, sort_keys=False, allow_unicode=True), end="")
    print(f"configuration OK: {path}", file=sys.stderr)
    return EXIT_OK


def _healthcheck(settings: Settings) -> int:
    healthy, reason = check(
        settings.state_dir,
        settings.poll_interval_seconds,
        settings.health.max_missed_polls,
        SYSTEM_CLOCK.time(),
    )
    print(reason)
    return EXIT_OK if healthy else EXIT_FAILURE


def _status(settings: Settings) -> int:
    try:
        store = build_store(settings)  # a DSN that does not parse: refused here
        states, unreadable = store.scan()
        holders = store.holders() if store.shared else {}
    except StateError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    for bad in unreadable:
        print(f"unreadable: {bad.where}: {bad.reason}")
    if not states:
        print(f"no {'readable ' if unreadable else ''}tasks in {store.where}")
        return EXIT_OK
    width = max(len(s.key) for s in states)
    price = settings.llm.price
    # The cost is the task's, all runs together (tokens stay the run's, as before).
    cost = f" {'cost ' + price.currency:>16}" if price else ""
    header = f"{'task':<{width}}  {'status':<8} {'run':>3} {'step':>4} {'tokens':>8}{cost}"
    print(header + "  last activity" + ("          worked by" if store.shared else ""))
    for s in sorted(states, key=lambda s: s.updated_at, reverse=True):
        counts = f"{s.run:>3} {s.step:>4} {s.usage.total:>8}"
        if price:
            task = s.earlier_usage.plus(s.usage)
            spent = price.cost(task.prompt_tokens, task.completion_tokens)
            counts += f" {shown(spent, '').strip():>16}"
        holder = holders.get(s.key)
        by = (
            f"  {holder.daemon} (lease to {holder.expires.astimezone(UTC):%H:%M:%SZ})"
            if holder
            else ""
        )
        print(f"{s.key:<{width}}  {s.status.value:<8} {counts}  {s.updated_at}{by}")
    return EXIT_OK


def _show(settings: Settings, ref: str, run: int | None, as_json: bool, follow: bool) -> int:
    try:
        key = TaskKey.parse(ref)
    except ValueError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    # Colour only on a terminal, and not there either when NO_COLOR is set (no-color.org).
    tty = sys.stdout.isatty()
    colour = tty and not os.environ.get("NO_COLOR")
    store = None
    try:
        store = build_store(settings)
        show.command(
            store,
            key,
            run,
            settings.llm.price,
            sys.stdout,
            show.Options(as_json=as_json, follow=follow, tty=tty, colour=colour),
            wait=threading.Event().wait,
        )
    except KeyboardInterrupt:  # the end of a `--follow`
        if tty:
            print()  # below the progress line
    except TimelineError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except StateError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    finally:
        if store is not None:
            store.close()
    return EXIT_OK


def _db(settings: Settings, command: str, state_dir: Path | None) -> int:
    from bot.store import admin  # psycopg is imported only for these commands

    try:
        if command == "migrate":
            applied, version = admin.migrate(settings)
            for name in applied:
                print(f"applied {name}")
            print(f"database schema is at version {version}")
        elif command == "import":
            assert state_dir is not None
            copied, where = admin.import_files(settings, state_dir)
            print(f"imported {copied} tasks from {state_dir} into {where}")
        else:
            assert state_dir is not None
            copied, where = admin.export_files(settings, state_dir)
            print(f"exported {copied} tasks from {where} into {state_dir}")
    except StateError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return EXIT_OK


def _prune(settings: Settings, older_than: str, dry_run: bool) -> int:
    try:
        age = parse_duration(older_than)
    except ValueError as exc:
        print(f"bot: --older-than: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        result = prune(build_store(settings), age, SYSTEM_CLOCK.now(), dry_run)
    except StateError as exc:  # the store's DSN refused, or the database away
        print(f"bot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    verb = "would remove" if dry_run else "removed"
    for key in result.removed:
        print(f"{verb} {key}")
    for key in result.busy:
        print(f"kept {key}: being worked on")
    for failure in result.failed:
        print(f"failed {failure}", file=sys.stderr)
    mb = result.freed_bytes / 1e6
    print(
        f"{verb} {len(result.removed)} finished tasks and {result.old_run_files} files of earlier"
        f" runs older than {older_than} ({mb:.1f} MB)"
    )
    return EXIT_FAILURE if result.failed else EXIT_OK


def run_daemon(settings: Settings, *, once: bool) -> int:
    log = logging_setup.get_logger("bot.cli")
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal_received", signal=signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    runtime = Runtime.from_environ()
    notifier = Notifier(runtime.notify_socket, runtime.watchdog_usec)
    try:
        with Application(settings, once=once, stop=stop, notifier=notifier) as app:
            app.run()
            auth_error = app.daemon.auth_error
    except DatabaseError as exc:  # away for now (a restart may find it): not the config's fault
        log.error("database_unavailable", error=str(exc))
        return EXIT_FAILURE
    except StateError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except AuthError as exc:
        log.error("forge_auth_failed", error=str(exc))
        return EXIT_FAILURE
    except ForgeError as exc:
        log.error("forge_unavailable", error=str(exc), status=exc.status)
        return EXIT_FAILURE
    except ListenError as exc:
        print(f"bot: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    log.info("daemon_exit")
    if once and auth_error is not None:
        return EXIT_FAILURE  # the token was rejected during the cycle: the work did not happen
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
