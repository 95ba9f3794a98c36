"""A DOM read with the standard library's HTML parser: what the page tests look at."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser


class Dom(HTMLParser):
    """What a test needs of a DOM: every element (with its attributes), the text, the title,
    the text of elements by id and the kinds of the timeline's entries, in order."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: Counter[str] = Counter()
        self.attributes: list[tuple[str, str]] = []
        self.ids: set[str] = set()
        self.by_id: dict[str, str] = {}
        self.kinds: list[str] = []
        self.task_rows = 0
        self.text = ""
        self.title = ""
        self._open: list[tuple[str, str | None, bool]] = []  # tag, id, is a kind span
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        found = dict(attrs)
        self.attributes += [(name, value or "") for name, value in attrs]
        if found.get("id"):
            self.ids.add(str(found["id"]))
        classes = (found.get("class") or "").split()
        self.task_rows += tag == "tr" and "task" in classes
        if tag not in ("meta", "br", "input", "link", "img"):
            self._open.append((tag, found.get("id"), "kind" in classes))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        self.text += data
        for tag, ident, _kind in self._open:
            if ident:
                self.by_id[ident] = self.by_id.get(ident, "") + data
            if tag == "title":
                self.title += data
        if self._open and self._open[-1][2]:
            self.kinds.append(data.strip())
