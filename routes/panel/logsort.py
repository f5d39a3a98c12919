"""A log page's sort (the click, conversion and postback logs): `?sort=` as every list takes it
(routes/panel/sorting.py: two keys, `-` for descending, a header click makes its column the first key),
over the columns the page shows, turned into the keyset order the log reads in SQL
(models/reporting/logorder.py). Without `sort=` a log keeps its own order, newest first, and its cheap
cursor; sorted, its cursor is the last row's values of the keys, so "Older" is the next page in that order.
"""

from __future__ import annotations

from collections.abc import Iterable

import falcon

from models.reporting.logorder import ID_KEY, LogOrder, OrderKey, log_order
from routes.panel.sorting import Sort
from routes.v1.pagination import decode_cursor, encode_cursor

BAD_CURSOR = "The cursor is not one this log gave; start again without it."
# PERF: a sorted chunk is one top-N sort of every row the filters select (about 1 s over a million
# clicks), a time-ordered one a walk down an index: a sorted CSV reads ten times the rows per query
# (10,000 rows: about 2 minutes a million clicks rather than 20), its memory still one chunk.
SORTED_CHUNK_FACTOR = 10


def asks_sort(req: falcon.Request) -> bool:
    """Whether the query names a sort key (a log without a saved sort is sorted just then)."""
    return any(part.strip() for part in (req.get_param("sort") or "").split(","))


class LogSort:
    """The sort one request asks of a log: `columns` (key -> (stored column, is text)) limited to those
    `shown`; `saved`: a column set's sort, used when the query has none; `tie`: what makes the order
    total (the id, newest first)."""

    def __init__(
        self,
        req: falcon.Request,
        columns: dict[str, tuple[str, bool]],
        shown: Iterable[str],
        saved: str | None = None,
        tie: tuple[OrderKey, ...] = (ID_KEY,),
    ) -> None:
        self.columns = columns
        self.shown = tuple(key for key in shown if key in columns)
        text = req.get_param("sort")
        if text is None and saved:
            try:  # A set saved with a column the log no longer sorts by: its own order instead.
                self.sort = Sort.parse(saved, self.shown)
            except falcon.HTTPBadRequest:
                self.sort = Sort(())
        else:
            self.sort = Sort.parse(text, self.shown)
        self.tie = tie
        self.after = decode_cursor(req) if self.is_sorted else None

    @property
    def is_sorted(self) -> bool:
        return bool(self.sort.keys)

    @property
    def text(self) -> str:
        return self.sort.text

    def order(self, after: list | None = None) -> LogOrder:
        """The log's order after `after` (default: the request's cursor); 400 for a cursor it did not give."""
        after = self.after if after is None else after
        if after is not None and not isinstance(after, list):
            raise falcon.HTTPBadRequest(title="Bad cursor", description=BAD_CURSOR)
        keys = [(key.column, key.is_descending) for key in self.sort.keys]
        order = log_order(keys, None, self.columns, self.tie)
        if after is not None and not order.accepts(after):
            raise falcon.HTTPBadRequest(title="Bad cursor", description=BAD_CURSOR)
        return order.with_after(after)

    def clicked(self, key: str) -> str:
        """The sort a click on `key`'s header asks for: text ascending first, numbers and times descending."""
        return self.sort.clicked(key, is_descending_first=not self.columns[key][1])

    def direction(self, key: str) -> str:
        return self.sort.direction(key)

    def rank(self, key: str) -> int:
        return self.sort.rank(key)

    def mark(self, key: str) -> str:
        """The header's mark of a sort key (▲/▼, with its number when there are two), '' for another."""
        rank = self.sort.rank(key)
        if not rank:
            return ""
        arrow = "▼" if self.sort.keys[rank - 1].is_descending else "▲"
        return arrow + (str(rank) if len(self.sort.keys) > 1 else "")

    @staticmethod
    def cursor(after: list | None) -> str | None:
        return None if after is None else encode_cursor(after)
