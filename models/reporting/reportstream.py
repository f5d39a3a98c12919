"""A report as a stream of rows for a CSV export: summed by DuckDB over the columnar history and the row
store's rows it does not hold yet, fetched a chunk at a time, so a million-row report never sits in
memory (models/store/duckdb/reports.py `stream_groups`).

The numbers are run_report's (models/reporting/reports.py): the same pieces (the history's clicks up to
the row store's position, the row store's clicks after it and those queued for a copy again, every
conversion of the range by its click's dimensions, those whose click only the history holds by its
copy), grouped by the same keys (a day or hour from quarter-hour buckets in the report's timezone, an
offer's network, a campaign's traffic source). What the row store contributes (minutes of clicks not
yet copied, and the range's conversions) is read in one snapshot first, and handed to DuckDB; the
snapshot is closed before the first row is sent, so a slow download holds no row-store transaction,
only the history's shared lock (an append waits for it).

Rows come in the groups' order (DuckDB's: NULL first, text by code point), not the page's sort. A
report the history cannot answer (no history on this node, missing, damaged, behind, locked), one
read from raw clicks only, one grouped or filtered by label, or one the rollup cubes answer (its rows
one per value of the cubes' few-valued dimensions, as its page holds them: `rollups_answer`), is
run_report's, held in memory and then streamed: those say so in `streamed`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import time as time_module
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

from peewee import Database

from models.migrations.deferred import rollups_ready
from models.ops.retention import pruned_before
from models.reporting.currency import CurrencyError, check_report_currency
from models.reporting.history import HistoryFiles
from models.reporting.reports import (
    END_OF_TIME,
    GAP_COLUMNS,
    LABEL_GROUP,
    REPORT_METRICS,
    ROLLUP_GROUPS,
    TIME_GROUPS,
    Gaps,
    ParentGroups,
    ReportError,
    ReportQuery,
    _check,
    _check_answers,
    _currency_notes,
    _drop_non_finite,
    _Labels,
    _range,
    _row,
    all_gaps,
    campaign_ids,
    read_cost_gaps,
    read_gaps,
    resolve_names,
    run_report,
)
from models.reporting.timerange import zone
from models.store.database import read_tx
from models.store.duckdb.connection import HISTORY_UNAVAILABLE, open_history
from models.store.duckdb.reports import (
    QUARTER_HOUR_MS,
    HistoryPiece,
    history_conversion_rows,
    history_unconverted,
    history_unconverted_rows,
    stream_groups,
)
from models.store.history import HistoryStore
from models.store.reports import ReportStore
from models.tables.dimensions import METRICS, MONEY_METRICS, NAMED_GROUPS

MONEY_POSITIONS = tuple(metric in MONEY_METRICS for metric in METRICS)  # DuckDB sums all as DOUBLE.


@dataclass
class ReportStream:
    """A report whose rows are read as they are iterated (`rows`, once); `total` is there after."""

    columns: list[str]
    currency: str
    notes: list[str]
    rows: Iterator[dict[str, Any]]
    streamed: bool  # Summed by DuckDB and fetched in chunks (False: run_report's, in memory).
    unconverted: list[dict[str, Any]] = field(default_factory=list)
    # The totals row, there once `rows` is read to its end (a list the rows fill: they hold no
    # reference to the stream, so a stream dropped unread is freed at once, and its history let go).
    totals: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total(self) -> dict[str, Any] | None:
        return self.totals[0] if self.totals else None


def stream_report(
    db: Database,
    query: ReportQuery,
    *,
    now: float | None = None,
    history: HistoryFiles | None = None,
    chunk: int = 10_000,
) -> ReportStream:
    """The report `query` asks for, its rows to iterate; ReportError (or TimeRangeError) as run_report."""
    if not sums_in_history(db, query, history):
        return _in_memory(db, query, now, history)
    assert history is not None
    prepared = prepare_history(db, query, now, history)
    if prepared is None:
        return _in_memory(db, query, now, history)  # It says why in a note, as every report does.
    try:
        rows = stream_groups(prepared.columnar, prepared.piece, chunk=chunk)
    except BaseException as error:
        try:
            _close_with(prepared.reading, error)
        except HISTORY_UNAVAILABLE:
            return _in_memory(db, query, now, history)
    stream = ReportStream(
        columns=prepared.columns,
        currency=prepared.currency,
        notes=prepared.notes,
        rows=iter(()),
        streamed=True,
        unconverted=prepared.unconverted,
    )
    stream.rows = ClosingRows(
        _rows(
            stream.totals,
            prepared.reading,
            rows,
            (prepared.shown, prepared.key_shown),
            prepared.names,
            (prepared.gaps, prepared.currency, prepared.cost_gaps),
        ),
        prepared.reading,
    )
    return stream


def sums_in_history(db: Database, query: ReportQuery, history: HistoryFiles | None) -> bool:
    """Whether DuckDB may sum `query`'s rows (the history there, not a raw or label report, not one the
    rollups answer sooner): else run_report makes it."""
    return not (
        history is None
        or query.source == "raw"
        or LABEL_GROUP in (*query.group_by, *query.filters)
        or rollups_answer(db, query)
    )


@dataclass
class HistorySums:
    """A report made ready for DuckDB to sum (stream_groups, page_groups): the history open (`reading`
    closes it), what the row store adds read in its snapshot, and what makes a summed row a report's."""

    reading: contextlib.ExitStack
    columnar: Any
    piece: HistoryPiece
    columns: list[str]
    shown: list[str]  # The groups in the query's order, as named in the rows.
    key_shown: list[str]  # The same in the order a summed row holds their values (time first).
    time_group: str | None
    names: dict[str, dict[int, str]]
    gaps: dict[tuple, Gaps]
    cost_gaps: dict[tuple, Gaps]
    currency: str
    notes: list[str]
    unconverted: list[dict[str, Any]]
    start_ms: int | None
    end_ms: int | None


def _close_with(reading: contextlib.ExitStack, error: BaseException) -> NoReturn:
    """Close `reading` with `error` going through its exits, so that open_history makes DuckDB's errors
    (out of memory, a damaged file ...) the history's own (HISTORY_UNAVAILABLE), as a `with` would;
    raise what it became."""
    reading.__exit__(type(error), error, error.__traceback__)
    raise error


def prepare_history(
    db: Database, query: ReportQuery, now: float | None, history: HistoryFiles
) -> HistorySums | None:
    """`query` made ready for DuckDB to sum, or None when the history cannot answer (run_report's then,
    which says why); ReportError (or TimeRangeError) as run_report."""
    resolved, renames, name_notes = resolve_names(db, query)
    _check(resolved)
    try:
        currency = check_report_currency(db.connection(), resolved.currency)
    except CurrencyError as exc:
        raise ReportError(str(exc)) from None
    conn = db.connection()
    store = ReportStore(conn)
    if "campaign" in resolved.filters:
        resolved = dataclasses.replace(
            resolved,
            filters={**resolved.filters, "campaign": campaign_ids(store, resolved.filters["campaign"])},
        )
    tz = zone(resolved.timezone)
    start, end = _range(resolved, tz, time_module.time() if now is None else now)
    bounds = (0 if start is None else start, END_OF_TIME if end is None else end)
    time_group = next((name for name in resolved.group_by if name in TIME_GROUPS), None)
    bucket = QUARTER_HOUR_MS if time_group else None  # Local hours begin on quarter hours everywhere.
    groups = tuple(name for name in resolved.group_by if name not in TIME_GROUPS)
    filters = {
        name: tuple(int(value) for value in values) if name in NAMED_GROUPS else values
        for name, values in resolved.filters.items()
    }
    reading = contextlib.ExitStack()
    try:
        columnar = reading.enter_context(
            open_history(history.path, write=False, memory_limit=history.memory_limit, wait=history.read_wait)
        )
        with read_tx(db):
            _check_answers(conn, columnar, history, [("history", *bounds)])
            offset = 1 if bucket else 0
            by_network = ParentGroups(
                "network", "offer", store.offer_networks, groups, filters, offset=offset
            )
            by_source = ParentGroups(
                "traffic_source",
                "campaign",
                store.campaign_sources,
                by_network.groups,
                by_network.filters,
                offset=offset,
            )
            clicks, conversions = HistoryStore(conn).answered()
            position, conversion_position = clicks[0], conversions[0]
            shape = (by_source.groups, by_source.filters, bucket)
            rest = list(
                store.rows(
                    "raw",
                    *bounds,
                    groups=shape[0],
                    filters=shape[1],
                    bucket=bucket,
                    after=position,
                    conversions_after=conversion_position,
                )
            )
            unconverted_rows = store.unconverted(*bounds, by_source.filters)
            gap_rows: list[tuple] = []  # Of the conversions whose click only the history holds.
            deleted_before = pruned_before(conn)
            if deleted_before is not None and bounds[0] < deleted_before:
                orphan_end = min(bounds[1], deleted_before)
                orphans = store.orphan_conversions(
                    bounds[0], orphan_end, by_source.filters, after=(position, conversion_position)
                )
                rest += history_conversion_rows(columnar, *shape, orphans)
                unconverted_orphans = store.orphan_unconverted(bounds[0], orphan_end, by_source.filters)
                unconverted_rows += history_unconverted(columnar, by_source.filters, unconverted_orphans)
                gap_rows = list(history_unconverted_rows(columnar, *shape, unconverted_orphans))
            unconverted = _unconverted(unconverted_rows)
            label_of = _Labels(time_group, tz)
            gaps = (
                read_gaps(
                    itertools.chain(
                        store.rows("unconverted", *bounds, groups=shape[0], filters=shape[1], bucket=bucket),
                        gap_rows,
                    ),
                    bucket,
                    label_of,
                    lambda key: by_network.key(by_source.key(key)),
                )
                if unconverted  # PERF: a second look only when some conversion waits for a rate.
                else {}
            )
            cost_gaps = read_cost_gaps(
                store, bounds, shape, label_of, lambda key: by_network.key(by_source.key(key))
            )
            notes = name_notes + _currency_notes(store, resolved, currency, unconverted)
            names = {group: store.names(group) for group in resolved.group_by if group in NAMED_GROUPS}
    except BaseException as error:
        try:
            _close_with(reading, error)
        except HISTORY_UNAVAILABLE:
            return None
    parents = {
        position_: grouping.parent_of
        for grouping in (by_network, by_source)
        for position_ in grouping.positions
    }
    columns = list(resolved.group_by)
    shown = [renames.get(column, column) for column in columns]
    return HistorySums(
        reading=reading,
        columnar=columnar,
        piece=HistoryPiece(
            by_source.groups,
            by_source.filters,
            bucket,
            *bounds,
            clicks=clicks,
            conversions=conversions,
            rest=rest,
            label_of=label_of,
            parents=parents,
        ),
        columns=shown
        + [f"{g}_name" for g in resolved.group_by if g in NAMED_GROUPS]
        + list(REPORT_METRICS)
        + list(GAP_COLUMNS),
        shown=shown,
        # A row's group values come time bucket first (as run_report's sums' keys).
        key_shown=[
            renames.get(column, column) for column in ([time_group, *groups] if time_group else groups)
        ],
        time_group=time_group,
        names=names,
        gaps=gaps,
        cost_gaps=cost_gaps,
        currency=currency,
        notes=notes,
        unconverted=unconverted,
        start_ms=start,
        end_ms=end,
    )


class ClosingRows:
    """A streamed report's rows that let the history go when done, closed, or dropped unread (a
    response never sent): a generator not yet started runs no `finally` when it is closed."""

    def __init__(self, rows: Iterator[dict[str, Any]], reading: contextlib.ExitStack) -> None:
        self.rows, self.reading = rows, reading

    def __iter__(self) -> ClosingRows:
        return self

    def __next__(self) -> dict[str, Any]:
        return next(self.rows)

    def close(self) -> None:
        close = getattr(self.rows, "close", None)
        if close is not None:
            close()
        self.reading.close()

    def __del__(self) -> None:
        self.close()


def _rows(
    totals_out: list[dict[str, Any]],
    reading: contextlib.ExitStack,
    rows: Iterator[tuple],
    columns: tuple[list[str], list[str]],
    names: dict[str, dict[int, str]],
    gaps: tuple[dict[tuple, Gaps], str, dict[tuple, Gaps]],
) -> Iterator[dict[str, Any]]:
    """Each summed row as run_report's rows are, the history closed at the end (or when abandoned).
    `columns`: the groups in the query's order and in the order a row holds their values."""
    shown, key_columns = columns
    width = len(shown)
    totals = [0] * len(METRICS)
    with reading:
        for row in rows:
            metrics = [
                (value or 0) if is_money else int(value or 0)  # 0, not 0.0, as run_report's none
                for value, is_money in zip(row[width:], MONEY_POSITIONS, strict=True)
            ]
            if not width and not any(row[width:]):
                continue  # No group: DuckDB's one row of no clicks.
            for index, value in enumerate(metrics):
                totals[index] += value
            values = dict(zip(key_columns, row[:width], strict=True))
            out = _row(
                {name: values[name] for name in shown},
                metrics,
                gaps[0].get(tuple(row[:width])),
                gaps[1],
                gaps[2].get(tuple(row[:width])),
            )
            name_ids(out, names)
            _drop_non_finite(out)
            yield out
    total = _row({}, totals, all_gaps(gaps[0]), gaps[1], all_gaps(gaps[2]))
    _drop_non_finite(total)
    totals_out.append(total)


def name_ids(row: dict[str, Any], names: dict[str, dict]) -> None:
    """`row`'s id groups named (`<group>_name`), an id 0 (none) shown as None."""
    for group, by_id in names.items():  # An id group is never renamed (sub_id_N are).
        value = row[group]
        row[f"{group}_name"] = by_id.get(value, "") if value else ""
        if value == 0:
            row[group] = None


def _unconverted(rows: list[tuple[str, int, float]]) -> list[dict[str, Any]]:
    by_currency: dict[str, list] = {}
    for code, count, payout in rows:
        counted = by_currency.setdefault(code, [0, 0.0])
        counted[0] += count
        counted[1] += payout
    return [
        {"currency": code, "conversions": count, "payout": round(payout, 6)}
        for code, (count, payout) in sorted(by_currency.items())
    ]


def rollups_answer(db: Database, query: ReportQuery) -> bool:
    """Whether run_report sums `query` from the rollup cubes: every group and filter one they keep (or
    a day or hour), their backfill done.

    PERF: such a report is run_report's, as its page is: the rollups answer it in milliseconds where
    DuckDB would sum every click of the period (0.5-0.65 s of CPU for 30 days of 3.2 M clicks,
    docs/PERFORMANCE.md "Every panel page at 3.2 M clicks"), and its rows are the page's, one per value
    of dimensions with few values (campaigns, offers, countries, devices ...), never one per click."""
    return (
        query.source == "auto"
        and all(name in ROLLUP_GROUPS or name in TIME_GROUPS for name in (*query.group_by, *query.filters))
        and rollups_ready(db.connection())
    )


def _in_memory(
    db: Database, query: ReportQuery, now: float | None, history: HistoryFiles | None
) -> ReportStream:
    report = run_report(db, query, now=now, history=history)
    return ReportStream(
        columns=report.columns,
        currency=report.currency,
        notes=report.notes,
        rows=iter(report.rows),
        streamed=False,
        totals=[report.total],
        unconverted=report.unconverted,
    )


__all__ = ["ReportStream", "rollups_answer", "stream_report"]
