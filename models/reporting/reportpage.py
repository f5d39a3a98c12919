"""One page of a report: its rows in the order asked (any metric or the group's label, either way, a
second key, ties in the report's own order), from an offset, with the number of rows and the totals
over all of them, and the total less chosen rows (the panel's summary-row subtraction).

Where DuckDB sums the report (models/reporting/reportstream.py `sums_in_history`: the columnar history
there and answering, the report not one the rollups answer sooner, not grouped or filtered by label),
it also computes the ratios, sorts, cuts the page and sums the totals (models/store/duckdb/reports.py
`page_groups`), and Python makes only the page's rows. Otherwise, and when the history cannot answer,
the page is cut from run_report's rows sorted here by the same rule, so both give the same page.

The rule (the panel's since the report builder had a sort): a metric sorts the rows that have a value
(ratios rounded as shown), those without one last either way; the group's label (`label`: a value as a
row holds it and its name -> the text shown) by its casefold, then itself; a day or hour by time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from peewee import Database

from models.reporting.history import HistoryFiles
from models.reporting.reports import (
    NOT_FINITE_NOTE,
    REPORT_METRICS,
    TIME_GROUPS,
    Report,
    ReportError,
    ReportQuery,
    _drop_non_finite,
    _row,
    all_gaps,
    run_report,
)
from models.reporting.reportstream import MONEY_POSITIONS, name_ids, prepare_history, sums_in_history
from models.reporting.summary import total_without
from models.store.duckdb.connection import HISTORY_UNAVAILABLE
from models.store.duckdb.reports import GROUP_KEY, PageAsk, may_pass, page_groups
from models.tables.dimensions import NAMED_GROUPS

MAX_PAGE_ROWS = 10_000
MAX_SORT_KEYS = 2
WHERE_OPERATORS = (">=", "<=", ">", "<", "=", "!=")
NONE_VALUE = "0"  # A named group's row without one (no offer, no network), as `without` names it.


@dataclass(frozen=True)
class PageQuery:
    """Which page: `sort`, (a metric or "group", descending) keys in turn (none: the report's order);
    `limit` rows from `offset`; `without`, values of the group (one group) whose rows the total less
    them leaves out (a named group's id, "0" for none; a day or hour's label); `label`, the text a value
    shows (value, its name) for the group's sort (default: the value, or its name)."""

    sort: tuple[tuple[str, bool], ...] = ()
    limit: int = 1000
    offset: int = 0
    without: tuple[str, ...] = ()
    label: Callable[[Any, str], str] | None = None
    # Only the rows that may pass each (metric, operator, value) (a rule's conditions; a little wider
    # than exact: models/store/duckdb/reports.py `may_pass`, the caller checks); the count and totals
    # stay every row's.
    where: tuple[tuple[str, str, float], ...] = ()


def check_page(query: ReportQuery, page: PageQuery) -> None:
    """ReportError saying what is wrong with a page of `query`."""
    keys = [key for key, _ in page.sort]
    for key in keys:
        if key != GROUP_KEY and key not in REPORT_METRICS:
            raise ReportError(
                f"Sort by {GROUP_KEY} or a metric: {', '.join(REPORT_METRICS)}; not {key[:40]!r}."
            )
    for metric, operator, _ in page.where:
        if metric not in REPORT_METRICS or operator not in WHERE_OPERATORS:
            raise ReportError(f"A page keeps rows by a metric and one of {', '.join(WHERE_OPERATORS)}.")
    if len(keys) > MAX_SORT_KEYS or len(set(keys)) < len(keys):
        raise ReportError("Sort by one key, or two different ones.")
    if (GROUP_KEY in keys or page.without) and len(query.group_by) != 1:
        raise ReportError("Sort by the group, or leave rows out of the total, in a report of one group.")
    if page.limit < 1:
        raise ReportError("A page holds 1 row or more.")
    if page.offset < 0:
        raise ReportError("The offset is 0 or more.")


def page_report(
    db: Database,
    query: ReportQuery,
    page: PageQuery,
    *,
    now: float | None = None,
    history: HistoryFiles | None = None,
) -> Report:
    """The page of the report `query` asks for: a Report whose rows are the page's, with `row_count`,
    the totals over every row, and `total_less` when `page.without` names some; ReportError (or
    TimeRangeError) as run_report."""
    check_page(query, page)
    if sums_in_history(db, query, history):
        assert history is not None
        report = _summed_page(db, query, page, now, history)
        if report is not None:
            return report
    return cut_page(run_report(db, query, now=now, history=history), query, page)


def _summed_page(
    db: Database, query: ReportQuery, page: PageQuery, now: float | None, history: HistoryFiles
) -> Report | None:
    prepared = prepare_history(db, query, now, history)
    if prepared is None:
        return None
    try:  # Out here: open_history makes DuckDB's errors (out of memory ...) the history's own.
        with prepared.reading:
            position = {name: index for index, name in enumerate(prepared.key_shown)}
            kinds = tuple(
                "time" if name == prepared.time_group else "id" if name in NAMED_GROUPS else "text"
                for name in prepared.key_shown
            )
            group = prepared.shown[0] if len(prepared.shown) == 1 else None
            names = prepared.names.get(group or "", {})
            label = page.label or _default_label

            def key_label(value: Any) -> str:
                shown = None if group in NAMED_GROUPS and value == 0 else value
                return label(shown, names.get(shown, "") if shown is not None else "")

            ask = PageAsk(
                sort=page.sort,
                limit=page.limit,
                offset=page.offset,
                kinds=kinds,
                base=tuple(position[name] for name in prepared.shown),
                label=key_label,
                without=tuple(_without_keys(page.without, kinds[0] if kinds else "text")),
                where=page.where,
            )
            found = page_groups(prepared.columnar, prepared.piece, ask)
    except HISTORY_UNAVAILABLE:
        return None

    def make(row: tuple) -> dict[str, Any]:
        width = len(prepared.key_shown)
        metrics = [
            (value or 0) if is_money else int(value or 0)
            for value, is_money in zip(row[width:], MONEY_POSITIONS, strict=True)
        ]
        values = dict(zip(prepared.key_shown, row[:width], strict=True))
        out = _row(
            {name: values[name] for name in prepared.shown},
            metrics,
            prepared.gaps.get(tuple(row[:width])),
            prepared.currency,
            prepared.cost_gaps.get(tuple(row[:width])),
        )
        name_ids(out, prepared.names)
        _drop_non_finite(out)
        return out

    rows = [make(row) for row in found.rows]
    totals = [
        (value or 0) if is_money else int(value or 0)
        for value, is_money in zip(found.totals, MONEY_POSITIONS, strict=True)
    ]
    total = _row({}, totals, all_gaps(prepared.gaps), prepared.currency, all_gaps(prepared.cost_gaps))
    notes = list(prepared.notes)
    if _drop_non_finite(total) or found.has_non_finite:
        notes.append(NOT_FINITE_NOTE)
    return Report(
        columns=prepared.columns,
        rows=rows,
        total=total,
        start_ms=prepared.start_ms,
        end_ms=prepared.end_ms,
        sources=["history"],
        currency=prepared.currency,
        unconverted=prepared.unconverted,
        notes=notes,
        row_count=found.count,
        total_less=total_without(total, [make(row) for row in found.without]) if found.without else None,
    )


def _default_label(value: Any, name: str) -> str:
    return name or ("" if value is None else str(value))


def _without_keys(values: tuple[str, ...], kind: str) -> list[tuple]:
    """`without`'s values as the keys DuckDB's rows hold (a named group's none is 0 or NULL)."""
    keys: list[tuple] = []
    for value in values:
        if kind != "id":
            keys.append((value,))
        elif value == NONE_VALUE:
            keys += [(0,), (None,)]
        elif value.isascii() and value.isdigit() and int(value) < 2**63:
            keys.append((int(value),))
    return keys


def written(group: str, value: Any) -> str | None:
    """A row's group value as `without` names it (None: one it cannot name)."""
    if group in NAMED_GROUPS:
        return NONE_VALUE if value is None else str(value)
    return None if value is None else str(value)


def cut_page(report: Report, query: ReportQuery, page: PageQuery) -> Report:
    """`report` (run_report's, every row) cut to the page: sorted by the rule, the totals its own."""
    group = query.group_by[0] if len(query.group_by) == 1 else None
    column = report.columns[0] if group else ""
    rows = report.rows
    in_time = {id(row): index for index, row in enumerate(rows)} if group in TIME_GROUPS else None
    for key, is_descending in reversed(page.sort):  # Stable sorts, the last key first.
        rows = sort_rows(rows, column, key, is_descending, in_time, page.label)
    left_out = [row for row in report.rows if written(group or "", row.get(column)) in set(page.without)]
    report.row_count = len(report.rows)
    report.total_less = total_without(report.total, left_out) if left_out else None
    for metric, operator, value in page.where:
        low, high = may_pass(operator, value)
        rows = [row for row in rows if row.get(metric) is not None and low <= row[metric] <= high]
    report.rows = rows[page.offset : page.offset + page.limit]
    return report


def sort_rows(
    rows: list[dict[str, Any]],
    column: str,
    key: str,
    is_descending: bool,
    in_time: dict[int, int] | None = None,
    label: Callable[[Any, str], str] | None = None,
) -> list[dict[str, Any]]:
    """`rows` by one key, stably (rows equal on it keep their order): the group's label, a day or hour
    by time (`in_time`: each row's place in time order, by id()), or a metric with the rows without a
    value last either way."""
    if key == GROUP_KEY:
        if in_time is not None:  # A repeated hour's two rows in turn; the labels sort no other way.
            return sorted(rows, key=lambda row: in_time[id(row)], reverse=is_descending)
        text = label or _default_label

        def shown(row: dict[str, Any]) -> tuple[str, str]:
            value = text(row.get(column), row.get(f"{column}_name") or "")
            return value.casefold(), value

        return sorted(rows, key=shown, reverse=is_descending)
    present = [row for row in rows if row.get(key) is not None]
    present.sort(key=lambda row: row[key], reverse=is_descending)
    return present + [row for row in rows if row.get(key) is None]


__all__ = ["GROUP_KEY", "PageQuery", "check_page", "cut_page", "page_report", "sort_rows"]
