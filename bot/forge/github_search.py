"""GitHub discovery across repositories: a few search queries instead of 7 listings per repo.

`GET /search/issues` takes one query per owner (`user:acme`), with every watched label in one
`label:` qualifier (a comma-separated list matches any of them:
docs.github.com/search-github/searching-on-github/searching-issues-and-pull-requests, "Search
by label"), so the cost of an idle cycle is two requests per owner (labels, assignment) whatever
the number of repositories; results are narrowed to the configured repositories here.

Limits: the search API allows 30 requests a minute to an authenticated client
(docs.github.com/rest/search/search, "Rate limit"), in its own bucket (`x-ratelimit-resource:
search`); the adapter paces searches by that bucket's window as the answers tell it
(`pacing.ServerWindow`), a sliding window of our own is the default here; a query is
at most 256 characters (longer ones are refused with 422) and a search returns at most 1,000
results, and says `incomplete_results` when it timed out. An owner whose query cannot be built
(over-long label names) or whose results are not all there falls back to the per-repository
listing. The search index trails changes by a few seconds: a label added just before a cycle
may be seen one cycle later (the webhook, when configured, hears it at once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.forge.pacing import WindowPacer
from bot.model.thread import TaskSummary

# docs.github.com/rest/search/search: "The Search API does not support queries that are longer
# than 256 characters (not including operators or qualifiers)" - kept to the whole query here.
MAX_QUERY = 256
SEARCH_PER_MINUTE = 30
MAX_RESULTS = 1000

Getter = Callable[[str, dict[str, Any] | None], tuple[Any, str | None]]


class Pacer(Protocol):
    def acquire(self) -> float: ...


Summarize = Callable[[str, dict[str, Any]], TaskSummary]


@dataclass(frozen=True)
class Coverage:
    tasks: list[TaskSummary]
    uncovered: list[str]  # repositories to list one by one


def _quote(value: str) -> str:
    return '"' + value.replace('"', "") + '"'


def label_query(owner: str, labels: Sequence[str]) -> str:
    return f"is:open label:{','.join(_quote(x) for x in labels)} user:{owner}"


def assignee_query(owner: str, login: str) -> str:
    return f"is:open assignee:{login} user:{owner}"


class GitHubSearch:
    def __init__(
        self,
        get: Getter,
        summarize: Summarize,
        pacer: Pacer | None = None,
    ) -> None:
        self._get = get
        self._summarize = summarize
        self._pacer: Pacer = pacer or WindowPacer(SEARCH_PER_MINUTE, 60.0)

    def list_tasks(
        self, repos: Sequence[str], labels: Sequence[str], assignee: str | None
    ) -> Coverage:
        wanted = {r.lower(): r for r in repos}
        owners: dict[str, list[str]] = {}
        for name in repos:
            owners.setdefault(name.split("/")[0], []).append(name)
        found: dict[str, TaskSummary] = {}
        uncovered: list[str] = []
        for owner, owned in owners.items():
            queries = [label_query(owner, labels)]
            if assignee is not None:
                queries.append(assignee_query(owner, assignee))
            if any(len(q) > MAX_QUERY for q in queries):
                uncovered.extend(owned)
                continue
            answers = [self._search(query) for query in queries]
            if any(items is None for items in answers):
                uncovered.extend(owned)  # incomplete or over 1,000 results: list one by one
                continue
            for items in answers:
                for item in items or []:
                    found_in = self._repo_of(item)
                    if found_in is not None and found_in.lower() in wanted:
                        summary = self._summarize(wanted[found_in.lower()], item)
                        found[str(summary.key)] = summary
        return Coverage(sorted(found.values(), key=lambda s: s.key), uncovered)

    def _search(self, query: str) -> list[dict[str, Any]] | None:
        """Every result, or None when search cannot give them all (it timed out and says
        `incomplete_results`, or there are more than it returns)."""
        items: list[dict[str, Any]] = []
        url: str | None = "/search/issues"
        params: dict[str, Any] | None = {"q": query, "per_page": 100}
        while url is not None:
            self._pacer.acquire()
            data, url = self._get(url, params)
            params = None  # the Link header carries the query
            data = data or {}
            if data.get("incomplete_results") or int(data.get("total_count") or 0) > MAX_RESULTS:
                return None
            items.extend(data.get("items") or [])
        return items

    @staticmethod
    def _repo_of(item: dict[str, Any]) -> str | None:
        url = str(item.get("repository_url") or "")
        _, found, repo = url.rpartition("/repos/")
        return repo if found and repo.count("/") == 1 else None
