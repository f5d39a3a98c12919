"""A list page's table: its columns, sorted by any of them with two keys (routes/panel/sorting.py), the
header links that sort it, and its CSV, which is exactly the rows, order and columns the page shows.

A page describes its columns once (`Column`: what a row's cell holds and what kind of value it is) and
renders its own cells; the headers come from templates/_sorting.html. A money column is left out for a
user who hides money, from the table, its sort and its CSV alike.
"""

from __future__ import annotations

import csv
import io
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import falcon

from routes.panel.columnsets import ColumnChoice, ListSets
from routes.panel.reports import csv_text
from routes.panel.sorting import Sort

KINDS = ("text", "count", "percent", "money")
CSV_CHUNK = 500  # Rows written to the response per piece: a long list is never one string in memory.


@dataclass(frozen=True)
class Column:
    """One column: `value(row)` is what it sorts by and the CSV writes (None: no value, sorted last).
    `is_csv_only`: a column the CSV carries that the page shows inside another (an offer's URL)."""

    key: str
    header: str
    value: Callable[[Any], Any]
    kind: str = "count"
    is_csv_only: bool = False
    is_metric: bool = False  # A number of the period's report (`row["stats"]`), its cell drawn alike.
    is_about_money: bool = False  # Text that names money (a payout's currency): hidden with the amounts.

    @property
    def is_text(self) -> bool:
        return self.kind == "text"

    @property
    def is_money(self) -> bool:
        return self.kind == "money" or self.is_about_money

    def sort_value(self, row) -> Any:
        value = self.value(row)
        return value.lower() if isinstance(value, str) else value

    def csv_cell(self, row) -> str:
        value = self.value(row)
        if value is None:
            return ""
        if self.kind == "text":
            return csv_text(str(value))
        if self.kind == "percent":
            return f"{value:.1f}"
        if self.kind == "money":
            return f"{value:.2f}"
        return str(round(value))


# The period's numbers a list of sources or networks shows: key -> (header, kind).
METRICS = {
    "clicks": ("Clicks", "count"),
    "conversions": ("Conv.", "count"),
    "cr": ("CR", "percent"),
    "revenue": ("Revenue", "money"),
    "cost": ("Cost", "money"),
    "profit": ("Profit", "money"),
    "roi": ("ROI", "percent"),
    "epc": ("EPC", "money"),
    "cpc": ("CPC", "money"),
}
RATIOS = ("cr", "roi", "epc", "cpc")  # No value without clicks (or cost): shown as –, sorted last.


def metric_columns(keys: Iterable[str]) -> list[Column]:
    """Columns of the period's numbers, read from each row's `stats` (a report row)."""
    return [
        # ROI is a share of money: a user who hides money sees it no more than the amounts.
        Column(key, METRICS[key][0], _stat(key), METRICS[key][1], is_metric=True, is_about_money=key == "roi")
        for key in keys
    ]


def _stat(key: str) -> Callable[[Any], Any]:
    return lambda row: row["stats"].get(key)


def period_stats(report, group: str) -> dict[Any, dict]:
    """A report's rows by their `group` id; `stats_of` gives a row for an id without clicks."""
    return {row[group]: row for row in report.rows} if report else {}


def stats_of(stats: dict[Any, dict], key) -> dict:
    """The report row of `key`, or zeros (and no ratios) for one without clicks in the period."""
    empty = {name: 0 for name in METRICS if name not in RATIOS} | dict.fromkeys(RATIOS)
    return empty | stats.get(key, {})


@dataclass(frozen=True)
class ListView:
    """A list as one request asks for it: its columns, sort, rows in order and the query that shows it."""

    columns: tuple[Column, ...]
    sort: Sort
    rows: list
    state: dict[str, str]  # The filters (not the sort) the page's links carry.

    @property
    def query(self) -> str:
        """The page's whole query (filters and sort): its CSV link says exactly this."""
        return encode({**self.state, "sort": self.sort.text})

    @property
    def headers(self) -> tuple[Column, ...]:
        return tuple(column for column in self.columns if not column.is_csv_only)

    def link(self, column: str) -> str:
        """The query a click on `column`'s header asks for."""
        is_text = next(c.is_text for c in self.columns if c.key == column)
        return encode({**self.state, "sort": self.sort.clicked(column, is_descending_first=not is_text)})

    def shows(self, column: str) -> bool:
        return any(c.key == column for c in self.columns)


def chosen(columns: tuple[Column, ...], keys: tuple[str, ...]) -> tuple[Column, ...]:
    """The first column, then `keys`' columns in that order; a column only the CSV carries rides with
    the column before it (an offer's URL with its name, the payout's currency with the payout)."""
    groups: list[list[Column]] = []
    for column in columns:
        if column.is_csv_only and groups:
            groups[-1].append(column)
        else:
            groups.append([column])
    by_key = {group[0].key: group for group in groups[1:]}
    return tuple([*groups[0], *(column for key in keys if key in by_key for column in by_key[key])])


def encode(params: dict[str, str]) -> str:
    return urllib.parse.urlencode({name: value for name, value in params.items() if value}, safe=",")


class ListTable:
    """The columns of one list page (every one, for a user who sees money)."""

    def __init__(self, columns: Iterable[Column]) -> None:
        self.columns = tuple(columns)
        assert all(column.kind in KINDS for column in self.columns)

    def view(
        self,
        req: falcon.Request,
        principal,
        rows: list,
        state: dict[str, str],
        choice: ColumnChoice | None = None,
    ) -> ListView:
        """`rows` sorted as `?sort=` asks (400 for a column the user is not shown), with the columns they
        are shown; `state`: the page's filters, which its sort links keep; `choice`: the columns the
        user chose (a column set), the first always shown."""
        columns = tuple(c for c in self.columns if not (c.is_money and principal.hides_money))
        sort_text = req.get_param("sort")
        if choice is not None:
            columns = chosen(columns, choice.columns)
            if choice.columns != choice.base:
                state = {**state, "col": ",".join(choice.columns)}
            if sort_text is None:
                sort_text = choice.sort
        by_key = {column.key: column for column in columns if not column.is_csv_only}
        sort = Sort.parse(sort_text, by_key)
        ordered = sort.apply(rows, lambda row, key: by_key[key].sort_value(row))
        return ListView(columns, sort, ordered, state)


def chooser_context(table: ListTable, sets: ListSets, principal, view: ListView) -> dict[str, Any]:
    """What a list page's template needs for its column chooser and sets (templates/_columns.html) and
    its filter's links (the chosen columns ride along as `col=`)."""
    labels = {column.key: column.header for column in table.columns}
    shown = tuple(column.key for column in view.headers[1:])
    back = f"/panel/{sets.page.name}?{view.query}"
    return {
        "chooser": sets.chooser(principal, labels, shown, view.sort.text, back),
        "set_keep": [(name, value) for name, value in view.state.items() if value and name != "col"],
        "cols_text": view.state.get("col", ""),
    }


def send_csv(resp: falcon.Response, view: ListView, filename: str, total: list[str] | None = None) -> None:
    """The view's rows as a CSV download, streamed CSV_CHUNK rows at a time (`total`: a last row)."""
    resp.content_type = "text/csv; charset=utf-8"
    resp.set_header("Cache-Control", "no-store")
    resp.set_header("X-Content-Type-Options", "nosniff")
    resp.set_header("Content-Disposition", f'attachment; filename="{filename}"')
    resp.stream = csv_lines(view, total)


def csv_lines(view: ListView, total: list[str] | None = None) -> Iterator[bytes]:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([column.header for column in view.columns])
    for start in range(0, len(view.rows), CSV_CHUNK):
        for row in view.rows[start : start + CSV_CHUNK]:
            writer.writerow([column.csv_cell(row) for column in view.columns])
        yield out.getvalue().encode()
        out.seek(0)
        out.truncate()
    if total is not None:
        writer.writerow(total)
    yield out.getvalue().encode()
