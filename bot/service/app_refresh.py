"""A GitHub App's installations and their repositories, read again every
`github.app.refresh_minutes` (README, Tokens): what changed is applied without a restart."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from bot.core.log import get_logger
from bot.forge.errors import ForgeError
from bot.forge.factory import AppInstallations, Source
from bot.forge.github_app import Installation

log = get_logger(__name__)


@dataclass
class Changes:
    """What a read found, against the sources the daemon has."""

    # (the daemon's source, as it is now: its repositories maybe changed)
    kept: list[tuple[Source, Source]] = field(default_factory=list)
    gone: list[Source] = field(default_factory=list)  # an installation that is no more
    new: list[Source] = field(default_factory=list)  # an installation seen for the first time


class AppRefresh:
    def __init__(self, installations: Callable[[], AppInstallations | None]) -> None:
        """`installations`: the app's installations reader (built on the first refresh when
        start-up had none, e.g. an app with no installation yet)."""
        self._make = installations
        self._app: AppInstallations | None = None
        self._failing = False  # a failed read is logged once until one succeeds

    def read(self, sources: Sequence[Source]) -> Changes | None:
        """The difference between `sources` and the installations now; None when they could
        not be read (the previous set stays)."""
        try:
            self._app = self._app or self._make()
            found = {i.id: i for i in self._app.read()} if self._app else {}
        except ForgeError as exc:  # the network, a 5xx, a refused token: the old set stays
            if not self._failing:
                log.warning("app_refresh_failed", error=f"{type(exc).__name__}: {exc}")
            self._failing = True
            return None
        self._failing = False
        return self._changes(sources, found)

    def _changes(self, sources: Sequence[Source], found: dict[int, Installation]) -> Changes:
        changes = Changes()
        for source in sources:
            number = source.installation
            if number is None:  # not one of the app's (GitLab)
                changes.kept.append((source, source))
                continue
            now = found.pop(number, None)
            repos = now.repos if now else ()
            _log_change(number, source.repos, repos)
            if now is None:
                changes.gone.append(source)
            else:
                now_source = replace(source, repos=repos) if repos != source.repos else source
                changes.kept.append((source, now_source))
        for installation in found.values():
            _log_change(installation.id, (), installation.repos)
            assert self._app is not None  # it found them
            changes.new.append(self._app.source(installation))
        return changes


def _log_change(installation: int, before: tuple[str, ...], after: tuple[str, ...]) -> None:
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    if added or removed:
        log.info(
            "app_installation_changed", installation=installation, added=added, removed=removed
        )
