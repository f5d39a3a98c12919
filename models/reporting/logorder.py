"""A log sorted by the user's columns (the click, conversion and postback logs; routes/panel/sorting.py
parses `?sort=`): the order in SQL, paged by keyset so a page or a CSV chunk never reads the rows before
it into memory, and the same order in Python to merge two sorted sources (the row store and the
columnar history) page by page.

The order is the chosen keys, then the row's id, newest first, so it is total and a page's cursor is the
last row's values of those keys (`after`). A row without a value for a key (no offer for a default
action) goes last whichever the direction, as the other lists put it. A column that holds an id
(campaign, stream, offer) is sorted by its name: `ranks` gives each id its place among the names, and
SQL sorts by `CASE id WHEN … THEN place END`.

PERF: a sort other than the log's own order has no index to walk: each page is a top-N sort of the rows
the filters and the period select (SQLite and PostgreSQL keep only N rows in the sorter). The click log
reads the part the columnar history answers for from DuckDB instead (models/reporting/clicklog.py, ~5x
sooner over a million clicks); elsewhere narrow the period on a large install. The unsorted log stays
the cheap walk backwards on the index.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from peewee import Case, Database, Expression, Field

from models.errors import LannerError
from models.reporting.lognames import name_ranks
from models.reporting.timerange import localise_times, time_bounded, zone
from models.store.logorder import spelling_for


class LogOrderError(LannerError, ValueError):
    """A cursor that is not one the sorted log gave; one sentence for the user."""


@dataclass(frozen=True)
class OrderKey:
    """One sort key: a stored column, its direction, and for an id column the places of its names."""

    column: str
    is_descending: bool
    ranks: Mapping[int, int] | None = None
    is_text: bool = False

    def value(self, row: Mapping[str, Any]) -> Any:
        """This key's value for a row as read (None: no value, sorted last)."""
        raw = row.get(self.column)
        if self.ranks is not None:
            return None if raw is None else self.ranks.get(raw)
        return raw


ID_KEY = OrderKey("id", is_descending=True)
INT64 = 2**63


def _is_number(value: Any) -> bool:
    """A value a number column can be compared with on every database (a 64-bit int, a finite float)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -INT64 <= value < INT64
    return isinstance(value, float) and math.isfinite(value)


@dataclass(frozen=True)
class LogOrder:
    """The chosen keys, then the id newest first; `after`: the values of the last row already shown."""

    keys: tuple[OrderKey, ...]
    after: tuple[Any, ...] | None = None
    tie: tuple[OrderKey, ...] = (ID_KEY,)  # Keys that make the order total (a table's own key).
    all_keys: tuple[OrderKey, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "all_keys", (*self.keys, *self.tie))
        if self.after is not None and not self.accepts(self.after):
            raise LogOrderError("The cursor is not one this sorted log gave; start again without it.")

    def accepts(self, values: Any) -> bool:
        """Whether `values` could be a row's key in this order (a cursor sent back)."""
        if not isinstance(values, (list, tuple)) or len(values) != len(self.all_keys):
            return False
        for key, value in zip(self.all_keys, values, strict=True):
            if value is None:
                continue
            if key.is_text and (not isinstance(value, str) or "\x00" in value):
                return False  # PostgreSQL's text holds no NUL.
            if not key.is_text and not _is_number(value):
                return False
        return all(value is not None for value in values[len(self.keys) :])

    def key_of(self, row: Mapping[str, Any]) -> list[Any]:
        """The row's values of every key (the cursor after it)."""
        return [key.value(row) for key in self.all_keys]

    def merge_key(self, row: Mapping[str, Any]) -> Any:
        """A Python key putting rows in this order (for merging two sources each already in it)."""
        return functools.cmp_to_key(self._compare)(self.key_of(row))

    def _compare(self, left: list[Any], right: list[Any]) -> int:
        for key, a, b in zip(self.all_keys, left, right, strict=True):
            if a == b:
                continue
            if a is None or b is None:
                return 1 if a is None else -1
            is_less = a < b
            return (1 if is_less else -1) if key.is_descending else (-1 if is_less else 1)
        return 0

    def with_after(self, after: list[Any] | None) -> LogOrder:
        return LogOrder(self.keys, None if after is None else tuple(after), self.tie)

    def expression(self, model, key: OrderKey, bytewise: Callable[[Any], Any]):
        """The Peewee expression of a key over a row-store model (`bytewise`: the dialect's byte order of
        text, models/store/logorder.py)."""
        column: Field = getattr(model, key.column)
        if key.ranks is None:
            return bytewise(column) if key.is_text else column
        # PERF: a CASE of every id's place; a log of thousands of offers pays for it on each row sorted.
        # No names at all (no offers yet): one WHEN no id matches, as a CASE needs one.
        return Case(column, sorted(key.ranks.items()) or [(0, 0)], None)

    def order_by(self, model, bytewise: Callable[[Any], Any]) -> list:
        """Peewee orderings for a row-store model."""
        orderings = []
        for key in self.all_keys:
            expr = self.expression(model, key, bytewise)
            orderings.append((expr.desc if key.is_descending else expr.asc)(nulls="LAST"))
        return orderings

    def after_condition(self, model, bytewise: Callable[[Any], Any]) -> Expression | None:
        """Rows after `after` in this order (None without a cursor)."""
        if self.after is None:
            return None
        ways = []
        for index, (key, value) in enumerate(zip(self.all_keys, self.after, strict=True)):
            if value is not None:  # Nothing sorts after a NULL on its key but other NULLs.
                expr = self.expression(model, key, bytewise)
                beyond = (expr < value) if key.is_descending else (expr > value)
                beyond = beyond | expr.is_null()
                same = [
                    self.expression(model, k, bytewise).is_null()
                    if v is None
                    else (self.expression(model, k, bytewise) == v)
                    for k, v in zip(self.all_keys[:index], self.after[:index], strict=True)
                ]
                ways.append(functools.reduce(operator.and_, [*same, beyond]))
        return functools.reduce(operator.or_, ways)


NAMED = {"campaign_id": "campaign", "stream_id": "stream", "offer_id": "offer"}


def log_order(
    keys: list[tuple[str, bool]],
    after: list[Any] | None,
    columns: dict[str, tuple[str, bool]],
    tie: tuple[OrderKey, ...] = (ID_KEY,),
) -> LogOrder:
    """The sorted order of a log's `keys` ((key, descending) of `columns`), after a page's cursor."""
    order_keys = []
    for key, is_descending in keys:
        column, is_text = columns[key]
        ranks = name_ranks(NAMED[column]) if column in NAMED else None
        order_keys.append(OrderKey(column, is_descending, ranks, is_text))
    return LogOrder(tuple(order_keys), None if after is None else tuple(after), tie)


@dataclass(frozen=True)
class SortedPage:
    rows: list[dict[str, Any]]
    after: list[Any] | None  # The cursor of the next page; None on the last.
    # Why the columnar history, asked to answer, did not (the page says so); None if it did or was not asked.
    fallback: str | None = None


def sorted_page(
    db: Database, select, model, time_column, query, order: LogOrder, localised: tuple[str, ...]
) -> SortedPage:
    """One page of a row-store log in `order` after its cursor: `query` (a log filter: since, until,
    timezone, limit) bounds its range and length; `localised`: its UTC-ms columns shown as local ISO."""
    tz = zone(query.timezone)
    bytewise = spelling_for(db.connection()).bytewise
    after = order.after_condition(model, bytewise)
    if after is not None:
        select = select.where(after)
    select = time_bounded(
        select.order_by(*order.order_by(model, bytewise)),
        time_column,
        since=query.since,
        until=query.until,
        tz=tz,
        limit=query.limit + 1,
    )
    rows = list(select.dicts())
    page = rows[: query.limit]
    cursor = order.key_of(page[-1]) if len(rows) > query.limit else None
    return SortedPage(localise_times(page, localised, tz), cursor)
