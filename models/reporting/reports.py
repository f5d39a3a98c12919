"""Reports: clicks, conversions and money grouped by any of the click's dimensions, over a local date range.

A range in the user's timezone becomes UTC bounds `[start, end)` and is cut into pieces, each read
from the cheapest exact source (models/reporting/rollups.py): the smallest rollup cube with the report's
dimensions (the campaign cube for campaign/stream/offer reports, the country cube when country joins
them, else the detail cube), whole UTC days from its daily table (when the report does not group
by time), whole hours from its hourly one, and only a piece cut inside an hour from raw clicks and
conversions, by the indexed time columns. A report grouping or filtering by a dimension the rollups
do not keep (sub_id_N, referrer domain) reads raw rows, as it does while the rollup backfill is still
running. Every source yields the same metrics, summed per group in Python. A report that would
read raw rows for time `lanner prune` emptied refuses, saying why it needs them (PrunedRangeError),
instead of counting less.
The statements are the report store's (models/store/reports.py), over one read snapshot.

An hour report's rows are local hours; the hour the clocks go back through is two rows, each
labelled with its UTC offset. Range bounds follow models/reporting/timerange.py's rule for DST nights.

Conversions count at their click's time and on their click's dimensions, so cost, revenue and
conversion rate of a day are those of the same clicks.

Money is in the report currency (models/reporting/currency.py), named in the report. Conversions whose
currency has no exchange rate yet are not in revenue: the report lists them per currency, and
says so, rather than add them unconverted; and each row says how many of its own conversions wait
for a rate (`unconverted`) and in which currencies and days (`unconverted_note`), so a row's revenue
is either whole or marked as leaving those out. Clicks whose cost waits for a rate (its currency had
none when it was set: models/reporting/clickcosts.py) are named the same way (`uncosted`,
`uncosted_note`): their cost is not in the row's until a rate comes, then it is, at the click day's rate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
import time as time_module
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from peewee import Database

from models.choices import REPORT_PRESETS
from models.errors import LannerError, NotFoundError
from models.migrations.deferred import rollups_ready
from models.ops.retention import pruned_before
from models.optimisation.labels import LABELS, NO_LABEL, label_lookup, parse_slot
from models.reporting.currency import CurrencyError, check_report_currency
from models.reporting.history import HistoryFiles
from models.reporting.notes import MoneyNote
from models.reporting.rollups import add_metrics
from models.reporting.sourcenames import SourceNameError, resolve_source_names
from models.reporting.timerange import TimeRangeError, local_instant, zone
from models.store.database import read_tx
from models.store.duckdb.connection import HISTORY_UNAVAILABLE, HistoryBehind, HistoryIncomplete, open_history
from models.store.duckdb.history import ColumnarHistory
from models.store.duckdb.reports import (
    history_click_rows,
    history_conversion_rows,
    history_converted_rows,
    history_unconverted,
    history_unconverted_rows,
)
from models.store.history import HistoryStore
from models.store.reports import ReportStore
from models.tables.dimensions import (
    CUBES,
    DAY_MS,
    DIMENSION_COLUMNS,
    DIMENSIONS,
    HOUR_MS,
    METRICS,
    NAMED_GROUPS,
)

TIME_GROUPS = ("day", "hour")
UTC_ZONES = frozenset(
    (
        "UTC",
        "Etc/UTC",
        "Etc/UCT",
        "UCT",
        "Etc/Universal",
        "Universal",
        "Etc/Zulu",
        "Zulu",
        "GMT",
        "Etc/GMT",
        "Etc/GMT+0",
        "Etc/GMT-0",
        "Etc/GMT0",
        "Etc/Greenwich",
        "GMT0",
        "Greenwich",
    )
)
# The groups both rollup cubes can answer (their dimensions), in the order messages list them.
ROLLUP_GROUPS_ORDER = tuple(name for name, column in DIMENSION_COLUMNS.items() if column in DIMENSIONS)
ROLLUP_GROUPS = frozenset(ROLLUP_GROUPS_ORDER)
# A value's label (models/optimisation/labels.py): with the one sub_id slot the report groups by.
LABEL_GROUP = "label"
GROUPS = (*TIME_GROUPS, *DIMENSION_COLUMNS, LABEL_GROUP)
REPORT_METRICS = (
    "clicks",
    "unique_clicks",
    "unique_global",
    "unique_stream",
    "bots",
    "conversions",
    "leads",
    "sales",
    "rejected",
    "trash",
    "rebills",
    "cr",
    "revenue",
    "revenue_pending",
    "cost",
    "profit",
    "roi",
    "epc",
    "cpc",
    "cpa",
    "lp_views",
    "lp_clicks",
    "lp_ctr",
)
# Per row: its conversions with revenue not in it for want of a rate, and a sentence naming their
# currencies and the days they wait a rate for ("" when none).
GAP_COLUMNS = ("unconverted", "unconverted_note", "uncosted", "uncosted_note")
# A row's conversions waiting for a rate: (currency, UTC day start ms) -> [count, payout].
Gaps = dict[tuple[str, int], list]
# A detail-cube report over a longer range reads the columnar history instead (measured).
HISTORY_DETAIL_MS = 7 * DAY_MS
END_OF_TIME = (1 << 52) // DAY_MS * DAY_MS  # Unix ms far beyond any click; a whole number of days.


class ReportError(LannerError, ValueError):
    """A report that cannot be made; the message is one sentence for the user."""


class ReportNotFound(ReportError, NotFoundError):
    """A filter names a campaign that is not there."""


class PrunedRangeError(ReportError):
    """A report that needs raw clicks `lanner prune` deleted (the query itself is fine)."""


@dataclass
class ReportQuery:
    group_by: tuple[str, ...] = ("campaign",)
    filters: dict[str, tuple[str, ...]] = field(default_factory=dict)  # group name -> accepted values
    preset: str | None = None  # Or since/until (local dates or date-times; until exclusive).
    since: str | None = None
    until: str | None = None
    timezone: str = "UTC"
    # auto (the rollups, and the columnar history given to run_report for what they cannot answer, the
    # row store if it cannot); raw (the row store's clicks only: the tests compare the others with it);
    # history (the whole range from the columnar history and the row store's tail; no fallback).
    source: str = "auto"
    currency: str = ""  # The report currency the settings ask for; "" takes the stored one.


@dataclass
class Report:
    columns: list[str]
    rows: list[dict[str, Any]]
    total: dict[str, Any]
    start_ms: int | None
    end_ms: int | None
    sources: list[str]  # The pieces read, e.g. ["rollup_day", "rollup_hour", "raw"].
    currency: str = "USD"  # Of every amount in it.
    # Conversions in the range not in revenue for want of a rate: {currency, conversions, payout}.
    unconverted: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # Sentences on what the numbers leave out.
    # Why every click of the range was read from the row store rather than the rollups or the
    # columnar history ("the rollups do not keep sub_id_1"), or None: such a report costs time in
    # proportion to the period's clicks.
    raw_reason: str | None = None
    # Why the columnar history did not answer the raw clicks it was asked for (a note too), or None.
    fallback: str | None = None
    # One page of the report (models/reporting/reportpage.py): `rows` are the page's, `row_count` the
    # report's every row, `total` theirs; None for the whole report.
    row_count: int | None = None
    total_less: dict[str, Any] | None = None  # The total without the rows a page asked to leave out.

    def as_json(self) -> dict[str, Any]:
        paged = {} if self.row_count is None else {"row_count": self.row_count}
        return {
            **paged,
            "currency": self.currency,
            "rows": self.rows,
            "total": self.total,
            "sources": self.sources,
            "start_ms": self.start_ms,
            "end_ms": self.end_ms,
            "unconverted": self.unconverted,
            "notes": self.notes,
        }


def preset_range(preset: str, tz: ZoneInfo, now: float) -> tuple[int | None, int | None]:
    today = datetime.fromtimestamp(now, tz).date()

    def midnight(day: date) -> int:
        return local_instant(day.isoformat(), tz, is_end=False)

    if preset == "today":
        return midnight(today), midnight(today + timedelta(days=1))
    if preset == "yesterday":
        return midnight(today - timedelta(days=1)), midnight(today)
    if preset == "last_7_days":
        return midnight(today - timedelta(days=6)), midnight(today + timedelta(days=1))
    if preset == "last_30_days":
        return midnight(today - timedelta(days=29)), midnight(today + timedelta(days=1))
    if preset == "this_week":  # Since Monday (ISO weeks).
        return midnight(today - timedelta(days=today.weekday())), midnight(today + timedelta(days=1))
    if preset == "this_month":
        return midnight(today.replace(day=1)), midnight(today + timedelta(days=1))
    if preset == "last_month":
        first = today.replace(day=1)
        return midnight((first - timedelta(days=1)).replace(day=1)), midnight(first)
    if preset == "all_time":
        return None, None
    raise ReportError(f"Unknown date preset {preset!r}; use one of {', '.join(REPORT_PRESETS)}.")


def _range(query: ReportQuery, tz: ZoneInfo, now: float) -> tuple[int | None, int | None]:
    if query.preset and (query.since or query.until):
        raise ReportError("Give a date preset or a --from/--to range, not both.")
    if query.preset:
        return preset_range(query.preset, tz, now)
    start = local_instant(query.since, tz, is_end=False) if query.since else None
    end = local_instant(query.until, tz, is_end=True) if query.until else None
    if start is not None and end is not None and start >= end:
        raise ReportError("The range is empty: --to must be after --from.")
    return start, end


def report_range(query: ReportQuery, *, now: float | None = None) -> tuple[int | None, int | None]:
    """The UTC bounds [start, end) of `query`'s range, None where unbounded (ReportError or
    TimeRangeError saying what is wrong with it)."""
    return _range(query, zone(query.timezone), time_module.time() if now is None else now)


def _floor(ms: int, width: int) -> int:
    return ms - ms % width


def _ceil(ms: int, width: int) -> int:
    return -(-ms // width) * width


def plan_pieces(start: int, end: int, *, use_days: bool) -> list[tuple[str, int, int]]:
    """[start, end) as (source, from, to) pieces: rollup_day, rollup_hour, or raw for sub-hour edges."""
    h0, h1 = _ceil(start, HOUR_MS), _floor(end, HOUR_MS)
    if h0 >= h1:
        return [("raw", start, end)]
    pieces = [("raw", start, h0)] if start < h0 else []
    d0, d1 = _ceil(h0, DAY_MS), _floor(h1, DAY_MS)
    if use_days and d0 < d1:
        if h0 < d0:
            pieces.append(("rollup_hour", h0, d0))
        pieces.append(("rollup_day", d0, d1))
        if d1 < h1:
            pieces.append(("rollup_hour", d1, h1))
    else:
        pieces.append(("rollup_hour", h0, h1))
    if h1 < end:
        pieces.append(("raw", h1, end))
    return pieces


def _minutes_past_the_hour(tz: ZoneInfo, start: int, end: int) -> int:
    """0 where local hours start on UTC hours all over the range, else the minutes past one they
    start at somewhere in it (30 in India and Newfoundland, 45 in Nepal ...)."""
    first = max(start, 0)
    last = min(end, int(time_module.time() * 1000) + 366 * DAY_MS)
    step = max((last - first) // 400, HOUR_MS)
    for ms in range(first, last + step, step):
        offset = datetime.fromtimestamp(min(ms, last) / 1000, tz).utcoffset()
        if offset is not None and offset.total_seconds() % 3600:
            return int(offset.total_seconds() % 3600 // 60)
    return 0


def _past(minutes: int) -> str:
    return "half past" if minutes == 30 else f"{minutes} minutes past"


def _check_not_pruned(
    conn, pieces: list[tuple[str, int, int]], tz: ZoneInfo, bounds: tuple[int, int], why_raw: str | None
) -> None:
    """PrunedRangeError when a piece read from raw clicks reaches into time `lanner prune` emptied."""
    cutoff = pruned_before(conn)
    if not _reaches_pruned(cutoff, pieces):
        return
    assert cutoff is not None
    if why_raw is None:  # The range's edges, cut inside UTC hours.
        minutes = _minutes_past_the_hour(tz, *bounds)
        why_raw = (
            "the range begins or ends inside a UTC hour"
            + (f" (in {tz.key}, local hours begin at {_past(minutes)} UTC hours)" if minutes else "")
            + ", and the rollups count whole UTC hours"
        )
    local = datetime.fromtimestamp(cutoff / 1000, tz)
    day = local.date()
    if local_instant(day.isoformat(), tz, is_end=False) < cutoff:
        day += timedelta(days=1)
    raise PrunedRangeError(
        f"Clicks before {local:%Y-%m-%d %H:%M} ({tz.key}) were pruned (`lanner prune`), and this report "
        f"needs them: {why_raw}. Start the range at {day.isoformat()} or later."
    )


def _reaches_pruned(cutoff: int | None, pieces: list[tuple[str, int, int]]) -> bool:
    """Whether a piece read from raw clicks reaches into time whose clicks were deleted (`cutoff`)."""
    return cutoff is not None and any(s == "raw" and start < min(end, cutoff) for s, start, end in pieces)


def _cube_tables(query: ReportQuery) -> dict[str, str]:
    """The hourly and daily tables of the smallest rollup cube that has every dimension asked for."""
    needed = {
        DIMENSION_COLUMNS[name] for name in (*query.group_by, *query.filters) if name not in TIME_GROUPS
    }
    for dimensions, tables in CUBES.values():
        if needed <= set(dimensions):
            return tables
    raise AssertionError(f"no rollup cube has {sorted(needed)}")  # raw_only covers every other case


def _check(query: ReportQuery) -> None:
    unknown = [name for name in (*query.group_by, *query.filters) if name not in GROUPS]
    if unknown:
        names = ", ".join((*TIME_GROUPS, *ROLLUP_GROUPS_ORDER))
        raise ReportError(
            f"Cannot group or filter by {unknown[0]!r}; use {names}, sub_id_1 to sub_id_30, referrer_domain, "
            "lander, domain, label."
        )
    if LABEL_GROUP in (*query.group_by, *query.filters):
        _labelled_slot(query)
        wrong = [value for value in query.filters.get(LABEL_GROUP, ()) if value not in (*LABELS, NO_LABEL)]
        if wrong:
            raise ReportError(
                f"A label filter takes {', '.join((*LABELS, NO_LABEL))}, not {wrong[0][:40]!r}."
            )
    if any(name in TIME_GROUPS for name in query.filters):
        raise ReportError("Filter time with --from/--to or a preset, not a day or hour filter.")
    if sum(name in TIME_GROUPS for name in query.group_by) > 1:
        raise ReportError("Group by day or by hour, not both.")
    for name in ("stream", "offer", "network", "traffic_source", "lander"):
        # isascii: isdigit() alone takes "²"; an id past 64 bits is no row's (and SQLite cannot bind it).
        if any(
            not (value.isascii() and value.isdigit()) or int(value) >= 2**63
            for value in query.filters.get(name, ())
        ):
            raise ReportError(f"A {name} filter takes ids.")
    if query.source not in ("auto", "raw", "history"):
        raise ReportError("The source is auto, raw or history.")


def _labelled_slot(query: ReportQuery) -> int:
    """The sub_id slot whose values a report's label column or filter is about: the one it groups by."""
    slots = [slot for name in query.group_by if (slot := parse_slot(name)) is not None]
    if len(slots) != 1:
        raise ReportError(
            "A label is a sub id value's: group the report by one sub id (sub_id_N, or a source's "
            "parameter such as zoneid) to group or filter it by label."
        )
    return slots[0]


class LabelGroups:
    """The label column and filter: a value's label depends on its campaign (a campaign's own label, else
    its source's), so the store groups by campaign where the report asks for the label (and at the end,
    dropped again, where it only filters by it), and each key's campaign becomes the value's label."""

    def __init__(
        self, groups: tuple[str, ...], filters: dict, slot: int | None, lookup, *, offset: int
    ) -> None:
        self.groups, self.filters = groups, filters
        self.lookup = lookup
        if slot is None:
            self.positions: list[int] = []
            self.wanted = None
            return
        self.wanted = frozenset(
            "" if value == NO_LABEL else value for value in filters.get(LABEL_GROUP, (*LABELS, NO_LABEL))
        )
        self.filters = {name: values for name, values in filters.items() if name != LABEL_GROUP}
        self.is_extra = LABEL_GROUP not in groups  # Filtered by label only: campaign is added, then dropped.
        self.groups = tuple("campaign" if g == LABEL_GROUP else g for g in groups)
        self.positions = [offset + i for i, g in enumerate(groups) if g == LABEL_GROUP]
        if self.is_extra:
            self.groups += ("campaign",)
        self.campaign_position = offset + len(self.groups) - 1 if self.is_extra else self.positions[0]
        self.value_position = offset + groups.index(f"sub_id_{slot}")

    def key(self, key: tuple) -> tuple | None:
        """The report's key, its campaign made the value's label; None for a label filtered out."""
        if self.wanted is None:
            return key
        label = self.lookup(key[self.campaign_position], key[self.value_position])
        if label not in self.wanted:
            return None
        if self.is_extra:
            return key[:-1]
        values = list(key)
        for position in self.positions:
            values[position] = label
        return tuple(values)


def run_report(
    db: Database, query: ReportQuery, *, now: float | None = None, history: HistoryFiles | None = None
) -> Report:
    """The report `query` asks for; ReportError (or TimeRangeError) names what is wrong with it.

    A traffic source's parameter name (`zoneid`) groups and filters as the sub_id slot it fills, over
    the campaigns whose source defines it (models/reporting/sourcenames.py); its column keeps the name."""
    query, labels, notes = resolve_names(db, query)
    report = _run_report(db, query, now=now, history=history)
    if labels:
        report.columns = [labels.get(column, column) for column in report.columns]
        report.rows = [{labels.get(key, key): value for key, value in row.items()} for row in report.rows]
        report.notes = notes + report.notes
    return report


def resolve_names(db: Database, query: ReportQuery) -> tuple[ReportQuery, dict[str, str], list[str]]:
    """(`query` with traffic source names as ids and source parameter names as their sub_id_N, the
    sub_id_N -> name its columns are labelled with, notes on it); ReportError for a name that is none."""
    store = ReportStore(db.connection())
    ids = campaign_ids(store, query.filters["campaign"]) if "campaign" in query.filters else None
    if "traffic_source" in query.filters:
        query = dataclasses.replace(
            query,
            filters={**query.filters, "traffic_source": _source_ids(store, query.filters["traffic_source"])},
        )
    try:
        return resolve_source_names(query, GROUPS, ids)
    except SourceNameError as exc:
        raise ReportError(str(exc)) from None


def _source_ids(store: ReportStore, refs: tuple[str, ...]) -> tuple[str, ...]:
    """Traffic source names or ids as ids ("0": campaigns with none); ReportError for an unknown name."""
    by_name = {name: str(id_) for id_, name in store.names("traffic_source").items()}
    ids = []
    for ref in refs:
        if ref in by_name:
            ids.append(by_name[ref])
        elif ref.isascii() and ref.isdigit():
            ids.append(ref)
        else:
            raise ReportError(f"There is no traffic source {ref!r}.")
    return tuple(ids)


def _run_report(
    db: Database, query: ReportQuery, *, now: float | None = None, history: HistoryFiles | None = None
) -> Report:
    _check(query)
    if query.source == "history" and history is None:
        raise ReportError("This report cannot read the columnar history here; use auto or raw.")
    try:
        currency = check_report_currency(db.connection(), query.currency)
    except CurrencyError as exc:
        raise ReportError(str(exc)) from None
    conn = db.connection()
    store = ReportStore(conn)
    if "campaign" in query.filters:
        query = dataclasses.replace(
            query, filters={**query.filters, "campaign": campaign_ids(store, query.filters["campaign"])}
        )
    tz = zone(query.timezone)
    start, end = _range(query, tz, time_module.time() if now is None else now)
    bounds = (0 if start is None else start, END_OF_TIME if end is None else end)
    time_group = next((name for name in query.group_by if name in TIME_GROUPS), None)
    unkept = [
        name for name in (*query.group_by, *query.filters) if name not in (*TIME_GROUPS, *ROLLUP_GROUPS)
    ]
    why_raw = (  # Said when the raw clicks it needs were pruned.
        "it reads raw clicks only (--raw)"
        if query.source == "raw"
        else "it reads the columnar history's clicks (with the row store's conversions)"
        if query.source == "history"
        else f"the rollups do not keep {unkept[0]}"
        if unkept
        else "the rollup backfill has not finished"
        if not rollups_ready(conn)
        else None
    )
    raw_only = why_raw is not None
    bucket = None
    if time_group is not None:
        # Hour buckets fold exactly into local days and hours only where local hours start on UTC
        # hours; elsewhere (UTC+5:30 ...) quarter-hour buckets of raw rows do.
        minutes = 0 if raw_only else _minutes_past_the_hour(tz, *bounds)
        if minutes:
            raw_only = True
            why_raw = (
                f"a local {time_group} in {tz.key} begins at {_past(minutes)} a UTC hour, "
                "and the rollups count whole UTC hours"
            )
        bucket = HOUR_MS if not raw_only else 15 * 60_000
        if time_group == "day" and tz.key in UTC_ZONES:
            # UTC days are the daily tables' periods, and the history's sub id cube's: read those, not
            # 24x (or 96x) the rows.
            bucket = DAY_MS
    whole = False  # Whether the history answers the whole range sooner than the rollups.
    if raw_only:
        pieces = [("raw", *bounds)]
    else:
        tables = _cube_tables(query)
        # PERF (docs/analytics.md, measured): over weeks the detail cube has about as many rows as
        # there were clicks and the history reads it ~2x sooner; over days the cube is sooner (the
        # history's open costs ~25 ms), and the smaller cubes are always 4-70x sooner.
        whole = tables == CUBES["detail"][1] and bounds[1] - bounds[0] > HISTORY_DETAIL_MS
        pieces = [
            (tables.get(source.removeprefix("rollup_"), source), piece_start, piece_end)
            for source, piece_start, piece_end in plan_pieces(
                *bounds, use_days=time_group is None or bucket == DAY_MS
            )
        ]
    groups = tuple(name for name in query.group_by if name not in TIME_GROUPS)
    filters = {  # As the columns hold them.
        name: tuple(int(value) for value in values) if name in NAMED_GROUPS else values
        for name, values in query.filters.items()
    }
    label_slot = _labelled_slot(query) if LABEL_GROUP in (*query.group_by, *query.filters) else None
    shape = _Shape(groups, filters, bucket, time_group, tz, label_slot)
    read = None
    fallback = None  # Why the history did not answer the raw pieces it was asked to.
    from_history = None
    if history is not None and query.source != "raw":
        if whole:
            from_history = [("history", *bounds)]
        elif raw_only or _reaches_pruned(pruned_before(conn), pieces):
            # PERF: a rollup report's edges inside an hour read the row store while it holds their
            # clicks (an index range of minutes: ~1 ms, where opening the history costs ~25 ms).
            from_history = [("history" if s == "raw" else s, a, b) for s, a, b in pieces]
    if from_history is not None:
        try:
            read = _read(db, store, from_history, shape, bounds, history)
        except HISTORY_UNAVAILABLE as error:
            if query.source == "history":
                raise ReportError(str(error)) from None
            fallback = str(error)
        else:
            pieces, why_raw, raw_only = from_history, None, False
    if read is None:
        try:
            _check_not_pruned(conn, pieces, tz, bounds, why_raw)
        except PrunedRangeError as error:
            if fallback is None:
                raise
            raise PrunedRangeError(
                f"{error} The columnar history, which holds them, did not answer: {fallback}"
            ) from None
        # The history still names the clicks of unconverted conversions the row store lost (a rollup
        # report's), unless it just failed to answer.
        read = _read(
            db, store, pieces, shape, bounds, None, None if fallback or query.source == "raw" else history
        )
    sums, labels, unconverted, gaps, cost_gaps = read
    notes = _currency_notes(store, query, currency, unconverted)
    if not raw_only:
        fallback = None  # The rollups answered but for edges inside an hour: not the slow way.
    if fallback is not None:
        notes.append(f"{FALLBACK_NOTE} {fallback}")
    columns = list(query.group_by)
    time_index = columns.index(time_group) if time_group else None
    # The sums' keys hold the time bucket first (_group_key); a row shows and sorts in the query's order.
    key_columns = [time_group, *groups] if time_group else list(groups)
    shown = [key_columns.index(name) for name in columns]
    ordered = sorted(
        ((tuple(key[i] for i in shown), key, metrics) for key, metrics in sums.items()),
        key=lambda item: _sort_key(item, time_index, labels.starts),
    )
    rows = [
        _row(dict(zip(columns, values, strict=True)), metrics, gaps.get(key), currency, cost_gaps.get(key))
        for values, key, metrics in ordered
    ]
    totals = [0] * len(METRICS)
    for metrics in sums.values():
        for index, value in enumerate(metrics):
            totals[index] += value
    _name_ids(store, rows, query.group_by)
    names = [f"{g}_name" for g in query.group_by if g in NAMED_GROUPS]
    total = _row({}, totals, all_gaps(gaps), currency, all_gaps(cost_gaps))
    if [row for row in (*rows, total) if _drop_non_finite(row)]:
        notes.append(NOT_FINITE_NOTE)
    return Report(
        columns=columns + names + list(REPORT_METRICS) + list(GAP_COLUMNS),
        rows=rows,
        total=total,
        start_ms=start,
        end_ms=end,
        sources=sorted({source for source, _, _ in pieces}),
        currency=currency,
        unconverted=unconverted,
        notes=notes,
        raw_reason=why_raw if raw_only else None,
        fallback=fallback,
    )


@dataclass(frozen=True)
class _Shape:
    """What every piece of a report is read by: its groups, filters (as the columns hold them), time
    bucket and labels."""

    groups: tuple[str, ...]
    filters: dict[str, tuple]
    bucket: int | None
    time_group: str | None
    tz: ZoneInfo
    label_slot: int | None = None  # The sub_id slot a label column or filter is about.


def _read(
    db: Database,
    store: ReportStore,
    pieces: list[tuple[str, int, int]],
    shape: _Shape,
    bounds: tuple[int, int],
    history: HistoryFiles | None,
    orphans_history: HistoryFiles | None = None,
) -> tuple[dict[tuple, list], _Labels, list[dict[str, Any]], dict[tuple, Gaps], dict[tuple, Gaps]]:
    """The metric sums per group key of every piece, the labels that made their keys, the
    conversions left out of revenue for want of a rate, and those per group key (by currency and
    day; those whose click only the history holds are in the list, not per key), and the clicks whose
    cost waits for a rate per group key (by currency and day). With `history`, the
    "history" pieces read the columnar history: HISTORY_UNAVAILABLE if it cannot answer (missing,
    damaged, behind the row store, locked past its read_wait, out of memory). `orphans_history`,
    without `history`: where to look up the clicks of unconverted conversions the row store no longer
    holds (left out if it cannot answer)."""
    conn = db.connection()
    labels = _Labels(shape.time_group, shape.tz)
    sums: dict[tuple, list] = {}
    with contextlib.ExitStack() as reading:
        columnar = None
        if history is not None:
            # Before the row store's snapshot: no chunk commits in DuckDB while both are read.
            columnar = reading.enter_context(
                open_history(
                    history.path, write=False, memory_limit=history.memory_limit, wait=history.read_wait
                )
            )
        # One snapshot for every piece. PERF (issue 28, docs/PERFORMANCE.md): with the history open it is
        # held only while the row store is read (its rows kept), not while DuckDB sums, which the shared
        # lock keeps still: a snapshot held through back-to-back reports kept the flusher's checkpoints
        # from ever finishing, and SQLite's WAL grew by every click landed meanwhile.
        snapshot = reading.enter_context(contextlib.ExitStack())
        snapshot.enter_context(read_tx(db))
        if history is not None:
            _check_answers(conn, columnar, history, pieces)
        offset = 1 if shape.bucket else 0
        by_label = LabelGroups(
            shape.groups,
            shape.filters,
            shape.label_slot,
            label_lookup(shape.label_slot, store.campaign_sources()) if shape.label_slot else None,
            offset=offset,
        )
        by_network = ParentGroups(
            "network", "offer", store.offer_networks, by_label.groups, by_label.filters, offset=offset
        )
        by_source = ParentGroups(
            "traffic_source",
            "campaign",
            store.campaign_sources,
            by_network.groups,
            by_network.filters,
            offset=offset,
        )
        piece = (by_source.groups, by_source.filters, shape.bucket)
        # Each piece's rows, in the pieces' order (the sums add in it): a history piece's DuckDB part
        # read later, from what the snapshot said it answers for.
        parts: list[Callable[[], Iterable[tuple]]] = []
        for source, piece_start, piece_end in pieces:
            if source == "history":
                parts.append(_HistoryPiece.read(conn, piece_start, piece_end, *piece).rows_from(columnar))
            else:
                rows = store.rows(
                    source,
                    piece_start,
                    piece_end,
                    groups=by_source.groups,
                    filters=by_source.filters,
                    bucket=shape.bucket,
                )
                kept: Iterable[tuple] = list(rows) if columnar is not None else rows
                parts.append(functools.partial(iter, kept))
        by_currency: dict[str, list] = {}
        unconverted_rows = store.unconverted(*bounds, by_source.filters)
        gap_rows: list[tuple] = []  # ReportStore.rows("unconverted")'s, of the clicks only the history holds.
        orphans: list[tuple] = []  # Unconverted conversions whose click only the history holds.
        deleted_before = pruned_before(conn)
        if (
            deleted_before is not None
            and bounds[0] < deleted_before
            and (columnar is not None or orphans_history is not None)
        ):
            orphans = store.orphan_unconverted(bounds[0], min(bounds[1], deleted_before), by_source.filters)
            if columnar is None and orphans and orphans_history is not None:
                listed, gap_rows = _looked_up_unconverted(orphans_history, piece, orphans)
                unconverted_rows += listed
        # PERF: a second look only when some conversion waits for a rate (or may: the history's orphans).
        raw_gaps: Iterable[tuple] = ()
        if unconverted_rows or (columnar is not None and orphans):
            raw_gaps = store.rows("unconverted", *bounds, groups=piece[0], filters=piece[1], bucket=piece[2])
            if columnar is not None:
                raw_gaps = list(raw_gaps)
        cost_gaps = read_cost_gaps(
            store, bounds, piece, labels, lambda key: by_label.key(by_network.key(by_source.key(key)))
        )
        if columnar is not None:
            snapshot.close()  # The row store is read; the rest is DuckDB's.
        for part in parts:
            for row in part():
                key = by_label.key(by_network.key(by_source.key(_group_key(row, shape.bucket, labels))))
                if key is not None:
                    add_metrics(sums, key, row[-len(METRICS) :])
        if columnar is not None and orphans:
            unconverted_rows += history_unconverted(columnar, by_source.filters, orphans)
            gap_rows = list(history_unconverted_rows(columnar, *piece, orphans))
        gaps: dict[tuple, Gaps] = {}
        if unconverted_rows:
            gaps = read_gaps(
                itertools.chain(raw_gaps, gap_rows),
                shape.bucket,
                labels,
                lambda key: by_label.key(by_network.key(by_source.key(key))),
            )
        for code, count, payout in unconverted_rows:
            counted = by_currency.setdefault(code, [0, 0.0])
            counted[0] += count
            counted[1] += payout
    unconverted = [
        {"currency": code, "conversions": count, "payout": round(payout, 6)}
        for code, (count, payout) in sorted(by_currency.items())
    ]
    return sums, labels, unconverted, gaps, cost_gaps


def read_cost_gaps(
    store: ReportStore,
    bounds: tuple[int, int],
    piece: tuple[tuple[str, ...], dict[str, tuple], int | None],
    labels: _Labels,
    key_of: Callable[[tuple], tuple | None],
) -> dict[tuple, Gaps]:
    """The clicks whose cost waits for a rate per report key, by currency and UTC day (read_gaps's
    shape, amounts for payouts); none read when no cost waits (PERF: one look at an empty table)."""
    if not store.has_uncosted():
        return {}
    rows = store.rows("uncosted", *bounds, groups=piece[0], filters=piece[1], bucket=piece[2])
    return read_gaps(rows, piece[2], labels, key_of)


def read_gaps(
    rows: Iterable[tuple], bucket: int | None, labels: _Labels, key_of: Callable[[tuple], tuple | None]
) -> dict[tuple, Gaps]:
    """The conversions waiting for a rate per report key, by currency and day, from ReportStore.rows
    ("unconverted")'s `rows` (`key_of` their group values, a time bucket labelled first)."""
    gaps: dict[tuple, Gaps] = {}
    for row in rows:
        head, code, day_ms, count, payout = row[:-4], row[-4], row[-3], row[-2], row[-1]
        key = key_of(tuple(head) if not bucket else (labels(head[0]), *head[1:]))
        if key is not None:
            counted = gaps.setdefault(key, {}).setdefault((code, int(day_ms)), [0, 0.0])
            counted[0] += count
            counted[1] += payout or 0.0
    return gaps


def all_gaps(gaps: dict[tuple, Gaps]) -> Gaps:
    """Every row's gaps together: the total row's."""
    summed: Gaps = {}
    for by_day in gaps.values():
        for day_key, (count, payout) in by_day.items():
            counted = summed.setdefault(day_key, [0, 0.0])
            counted[0] += count
            counted[1] += payout
    return summed


def gap_note(gaps: Gaps | None, currency: str) -> str:
    """One sentence naming a row's conversions that have no rate, per currency with their UTC days;
    "" for none."""
    if not gaps:
        return ""
    by_code: dict[str, list] = {}
    for (code, day_ms), (count, payout) in sorted(gaps.items()):
        item = by_code.setdefault(code, [0, 0.0, []])
        item[0] += count
        item[1] += payout
        item[2].append(datetime.fromtimestamp(day_ms / 1000, UTC).date().isoformat())
    parts = [
        f"{count} in {code} (payout {round(payout, 6):g} {code}) on {', '.join(days)}"
        for code, (count, payout, days) in by_code.items()
    ]
    total = sum(item[0] for item in by_code.values())
    return (
        f"{total} conversion{'s' if total != 1 else ''} without an exchange rate into {currency}, not in "
        f"revenue, profit or ROI: {'; '.join(parts)} (UTC days)."
    )


def cost_gap_note(gaps: Gaps | None, currency: str) -> str:
    """One sentence naming a row's clicks whose cost has no rate, per currency with their UTC days; ""
    for none."""
    if not gaps:
        return ""
    by_code: dict[str, list] = {}
    for (code, day_ms), (count, amount) in sorted(gaps.items()):
        item = by_code.setdefault(code, [0, 0.0, []])
        item[0] += count
        item[1] += amount
        item[2].append(datetime.fromtimestamp(day_ms / 1000, UTC).date().isoformat())
    parts = [
        f"{count} in {code} (cost {round(amount, 6):g} {code}) on {', '.join(days)}"
        for code, (count, amount, days) in by_code.items()
    ]
    total = sum(item[0] for item in by_code.values())
    return (
        f"{total} click{'s' if total != 1 else ''} with a cost without an exchange rate into {currency}, "
        f"not in cost, profit or ROI until one is set: {'; '.join(parts)} (UTC days)."
    )


def _looked_up_unconverted(
    history: HistoryFiles, piece: tuple[tuple[str, ...], dict[str, tuple], int | None], orphans: list[tuple]
) -> tuple[list[tuple[str, int, float]], list[tuple]]:
    """history_unconverted and history_unconverted_rows in a history opened for them (PERF: only when
    such conversions exist); none if the history cannot answer (their revenue is left out all the
    same: only the listing is short)."""
    try:
        with open_history(
            history.path, write=False, memory_limit=history.memory_limit, wait=history.read_wait
        ) as conn:
            return history_unconverted(conn, piece[1], orphans), list(
                history_unconverted_rows(conn, *piece, orphans)
            )
    except HISTORY_UNAVAILABLE:
        return [], []


def _check_answers(conn, columnar, history: HistoryFiles, pieces: list[tuple[str, int, int]]) -> None:
    """HistoryBehind if the history file holds fewer clicks or conversions than the row store trusts it
    with (a file
    replaced by an older copy, until the next append fills it again); HistoryIncomplete if a piece read
    from it reaches into time it was made again without (after a prune)."""
    store = HistoryStore(conn)
    trusted, _ = store.state()
    columnar_history = ColumnarHistory(columnar, history.path.parent)
    held = columnar_history.position()
    if held < trusted:
        raise HistoryBehind(history.path, held, trusted)
    trusted_conversions, _ = store.conversion_state()
    held_conversions = columnar_history.conversion_position()
    if held_conversions is None or held_conversions < trusted_conversions:
        # (None: a file from before conversions were copied, until the next append adds them.)
        raise HistoryBehind(history.path, held_conversions or 0, trusted_conversions, "conversions")
    complete_from = columnar_history.complete_from()
    if any(source == "history" and start < complete_from for source, start, _ in pieces):
        moment = datetime.fromtimestamp(complete_from / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
        raise HistoryIncomplete(history.path, moment)


@dataclass(frozen=True)
class _HistoryPiece:
    """A raw piece answered from the columnar history where it answers for its clicks (ids up to the row
    store's position, not queued for a copy again) and from the row store for the rest; its conversions
    from the row store, as raw, grouped by their click's dimensions: those whose click only the history
    holds (deleted from the row store once copied) by the history's copy.

    `read` takes the row store's part in the caller's snapshot; `rows_from` the history's, under its
    shared lock (held since before the snapshot), after the snapshot may have ended."""

    start: int
    end: int
    groups: tuple[str, ...]
    filters: dict[str, tuple]
    bucket: int | None
    clicks: tuple[int, list[int]]  # The history's position, and the clicks queued for a copy again.
    conversions: tuple[int, list[int]]  # The same of the conversions.
    rest: list[tuple]  # The row store's rows of what the history does not answer for.
    unanswered: list[tuple] | None  # Conversions not yet copied whose click only the history holds.

    @classmethod
    def read(
        cls,
        conn,
        start: int,
        end: int,
        groups: tuple[str, ...],
        filters: dict[str, tuple],
        bucket: int | None,
    ) -> _HistoryPiece:
        clicks, conversions = HistoryStore(conn).answered()
        position, conversion_position = clicks[0], conversions[0]
        store = ReportStore(conn)
        rest = store.rows(
            "raw",
            start,
            end,
            groups=groups,
            filters=filters,
            bucket=bucket,
            after=position,
            conversions_after=conversion_position,
        )
        # PERF: a click leaves the row store only before the recorded cutoff (`lanner prune`, and
        # LANNER_RAW_RETENTION as docs/analytics.md asks): later conversions need no look for theirs.
        deleted_before = pruned_before(conn)
        unanswered = None
        if deleted_before is not None and start < deleted_before:
            # Only the conversions not yet copied (or queued) whose click only the history holds:
            # minutes' worth.
            unanswered = store.orphan_conversions(
                start, min(end, deleted_before), filters, after=(position, conversion_position)
            )
        return cls(
            start,
            end,
            groups,
            filters,
            bucket,
            clicks,
            conversions,
            list(rest),
            unanswered,
        )

    def rows_from(self, columnar) -> Callable[[], Iterable[tuple]]:
        """The piece's rows, the history's read from `columnar` when called."""

        def rows() -> Iterable[tuple]:
            shape = (self.groups, self.filters, self.bucket)
            copied = history_click_rows(
                columnar, *shape, self.start, self.end, position=self.clicks[0], queued=self.clicks[1]
            )
            converted = history_converted_rows(
                columnar, *shape, self.start, self.end, clicks=self.clicks, conversions=self.conversions
            )
            if self.unanswered is None:
                return itertools.chain(copied, converted, self.rest)
            orphans = history_conversion_rows(columnar, *shape, self.unanswered)
            return itertools.chain(copied, converted, self.rest, orphans)

        return rows


def _currency_notes(
    store: ReportStore, query: ReportQuery, currency: str, unconverted: list[dict[str, Any]]
) -> list[str]:
    notes: list[str] = [
        MoneyNote(
            f"{item['conversions']} conversion{'s' if item['conversions'] != 1 else ''} in "
            f"{item['currency']} (payout {item['payout']:g} {item['currency']}) have no exchange rate into "
            f"{currency} and are not in revenue; set one with `lanner currency rate set {item['currency']} "
            "RATE`."
        )
        for item in unconverted
    ]
    wanted = set(query.filters.get("campaign", ()))
    for campaign_id, alias, cost_currency in store.unrated_cost_campaigns(currency):
        if not wanted or str(campaign_id) in wanted:
            notes.append(
                MoneyNote(
                    f"Campaign {alias}'s costs are in {cost_currency}, which has no exchange rate into "
                    f"{currency}: its clicks' costs wait in {cost_currency}, out of cost, until `lanner "
                    f"currency rate set {cost_currency} RATE`."
                )
            )
    return notes


FALLBACK_NOTE = (
    "The columnar history did not answer: this report counted the row store's clicks (exact, slower)."
)
NOT_FINITE_NOTE = MoneyNote(
    "Some costs or revenues are not finite numbers and are left empty: a click URL's cost= stored "
    "before costs were bounded; `lanner cost set` over the campaign's period repairs them."
)


# The metrics an amount flows into: the only values of a row that can be Infinity or NaN (the rest are
# counts, ratios of counts, and group values).
AMOUNT_METRICS = ("revenue", "revenue_pending", "cost", "profit", "roi", "epc", "cpc", "cpa")


def _drop_non_finite(row: dict[str, Any]) -> bool:
    """Replace Infinity and NaN (which no JSON can carry) with None; whether there were any."""
    # PERF: only the amounts (a rules run builds 50,000-row reports: 18 -> 4 µs a row).
    bad = [
        name for name in AMOUNT_METRICS if (value := row.get(name)) is not None and not math.isfinite(value)
    ]
    for name in bad:
        row[name] = None
    return bool(bad)


def campaign_ids(store: ReportStore, refs: tuple[str, ...]) -> tuple[str, ...]:
    """A campaign filter's values (ids or aliases) as ids; ReportError for one naming no campaign."""
    by_alias = store.campaign_ids_by_alias()
    known = set(by_alias.values())
    ids = []
    for ref in refs:
        if ref.isdigit() and int(ref) in known:
            ids.append(ref)
        elif ref in by_alias:
            ids.append(str(by_alias[ref]))
        else:
            raise ReportNotFound(f"There is no campaign {ref!r}; a campaign filter takes ids or aliases.")
    return tuple(ids)


class _Labels:
    """A time bucket's local day or hour label, computed once per bucket (PERF: ~3 µs each).

    An hour the clocks go through twice (02:00 on a fall-back night in Berlin) is two rows, each
    labelled with its UTC offset: "2026-10-25 02:00+02:00", then "2026-10-25 02:00+01:00".
    `starts` keeps each label's first bucket, so rows sort in time order.
    """

    def __init__(self, time_group: str | None, tz: ZoneInfo) -> None:
        self.time_group, self.tz = time_group, tz
        self.cache: dict[int, str] = {}
        self.starts: dict[str, int] = {}

    def __call__(self, bucket: int) -> str:
        label = self.cache.get(bucket)
        if label is None:
            local = datetime.fromtimestamp(bucket / 1000, self.tz)
            if self.time_group == "day":
                label = local.date().isoformat()
            else:
                label = local.strftime("%Y-%m-%d %H:00")
                if _is_repeated_hour(local):
                    label += local.isoformat()[-6:]  # The offset, as +01:00.
            self.cache[bucket] = label
            if bucket < self.starts.get(label, bucket + 1):
                self.starts[label] = bucket
        return label


def _is_repeated_hour(local: datetime) -> bool:
    """Whether some time in `local`'s wall-clock hour happens twice (the clocks go back through it)."""
    offset, tz, seconds = local.utcoffset(), local.tzinfo, local.timestamp()
    # PERF: a shift of up to 2 h that repeats a time in this hour happens within 5 h of it, so
    # the offsets six hours either side settle nearly every hour cheaply (16 -> 4 µs a label).
    before, after = (datetime.fromtimestamp(seconds + shift, tz).utcoffset() for shift in (-21_600, 21_600))
    if before == offset == after:
        return False
    hour = local.replace(minute=0, second=0, microsecond=0)
    for wall in (hour, hour.replace(minute=30), hour.replace(minute=59, second=59)):
        # Twice: the first occurrence (fold=0) has the larger offset; in a skipped time, the smaller.
        first, second = wall.replace(fold=0).utcoffset(), wall.replace(fold=1).utcoffset()
        if first is not None and second is not None and first > second:
            return True
    return False


def time_buckets(time_group: str, tz: ZoneInfo, start_ms: int, end_ms: int) -> list[tuple[str, int]]:
    """Every day or hour of [start_ms, end_ms) as a report grouped by `time_group` in `tz` labels it,
    with the instant it begins, in time order: a chart's x axis, empty buckets included (a repeated
    hour twice, a skipped one not at all)."""
    labels = _Labels(time_group, tz)
    if time_group == "day":
        day = datetime.fromtimestamp(start_ms / 1000, tz).date()
        while (midnight := local_instant(day.isoformat(), tz, is_end=False)) < end_ms:
            labels(max(midnight, start_ms))
            day += timedelta(days=1)
    else:
        for moment in range(start_ms, end_ms, 15 * 60_000):  # Local hours begin on quarter hours.
            # PERF: only where a local hour begins (~1 µs to tell; a label costs ~10 µs to make).
            if moment == start_ms or datetime.fromtimestamp(moment / 1000, tz).minute == 0:
                labels(moment)
    return sorted(labels.starts.items(), key=lambda item: item[1])


class ParentGroups:
    """A group made of another's ids: a network is a group of offers, a traffic source a group of
    campaigns. The store is asked for the children, and each child's sums are added under its parent
    (None: children with none, and clicks with no child). A parent filter becomes a filter on its
    children (0 for none), intersected with a filter on the children."""

    def __init__(
        self,
        name: str,
        child: str,
        parent_of: Callable[[], dict[int, int | None]],
        groups: tuple[str, ...],
        filters: dict,
        *,
        offset: int,
    ) -> None:
        self.groups, self.filters = groups, filters
        self.positions = [offset + index for index, group in enumerate(groups) if group == name]
        if not self.positions and name not in filters:
            return
        self.parent_of = parent_of()
        self.groups = tuple(child if group == name else group for group in groups)
        if name in filters:
            wanted = set(filters[name])
            children = {0} if 0 in wanted else set()
            children |= {id_ for id_, parent in self.parent_of.items() if (parent or 0) in wanted}
            if child in filters:
                children &= set(filters[child])
            rest = {group: values for group, values in filters.items() if group != name}
            self.filters = {**rest, child: tuple(sorted(children)) or (-1,)}  # -1: no child's id.

    def key(self, key: tuple) -> tuple:
        if not self.positions:
            return key
        values = list(key)
        for position in self.positions:
            values[position] = self.parent_of.get(values[position])
        return tuple(values)


def _group_key(row: tuple, bucket: int | None, labels: _Labels) -> tuple:
    width = len(row) - len(METRICS)
    if bucket:
        return (labels(row[0]), *row[1:width])
    return tuple(row[:width])


def _sort_key(item: tuple, time_index: int | None, label_starts: dict[str, int]) -> tuple:
    """Group values in order; the time label by its first bucket (a repeated hour's two rows in turn)."""
    return tuple(
        (0, label_starts[value])
        if index == time_index
        else (0, value)
        if isinstance(value, (int, float))
        else (1, str(value))
        for index, value in enumerate(item[0])
    )


def _ratio(numerator: float, denominator: float, scale: float = 1.0) -> float | None:
    return round(numerator / denominator * scale, 4) if denominator else None


def _row(
    groups: dict[str, Any],
    metrics: list,
    gaps: Gaps | None = None,
    currency: str = "",
    cost_gaps: Gaps | None = None,
) -> dict[str, Any]:
    values = dict(zip(METRICS, metrics, strict=True))
    conversions = values["leads"] + values["sales"] + values["rebills"]
    revenue = round(values["revenue"], 6)
    cost = round(values["click_cost"] + values["conversion_cost"], 6)
    profit = round(revenue - cost, 6)
    clicks = values["clicks"]
    return {
        **groups,
        "clicks": clicks,
        "unique_clicks": values["unique_campaign"],
        "unique_global": values["unique_global"],
        "unique_stream": values["unique_stream"],
        "bots": values["bots"],
        "conversions": conversions,
        "leads": values["leads"],
        "sales": values["sales"],
        "rejected": values["rejected"],
        "trash": values["trash"],
        "rebills": values["rebills"],
        "cr": _ratio(conversions, clicks, 100),
        "revenue": revenue,
        "revenue_pending": round(values["revenue_pending"], 6),
        "cost": cost,
        "profit": profit,
        "roi": _ratio(profit, cost, 100),
        "epc": _ratio(revenue, clicks),
        "cpc": _ratio(cost, clicks),
        "cpa": _ratio(cost, conversions),
        # The lander step: clicks sent to a lander, those that went on to the offer, the share that did.
        "lp_views": values["lp_views"],
        "lp_clicks": values["lp_clicks"],
        "lp_ctr": _ratio(values["lp_clicks"], values["lp_views"], 100),
        "unconverted": sum(count for count, _ in gaps.values()) if gaps else 0,
        "unconverted_note": gap_note(gaps, currency),
        "uncosted": sum(count for count, _ in cost_gaps.values()) if cost_gaps else 0,
        "uncosted_note": cost_gap_note(cost_gaps, currency),
    }


def _name_ids(store: ReportStore, rows: list[dict[str, Any]], group_by: tuple[str, ...]) -> None:
    """Add campaign/stream/offer/lander names next to their ids."""
    for group in group_by:
        if group in NAMED_GROUPS:
            names = store.names(group)
            for row in rows:
                row[f"{group}_name"] = names.get(row[group], "") if row[group] else ""
                if row[group] == 0:
                    row[group] = None


def parse_filters(expressions: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """`country=US,GB` expressions as {group: values}; ReportError for a malformed one."""
    filters: dict[str, tuple[str, ...]] = {}
    for expression in expressions:
        name, separator, values = expression.partition("=")
        name = name.strip()
        if not separator or not name:
            raise ReportError(f"{expression!r} is not a filter of the form name=value1,value2.")
        parts = tuple(value.strip() for value in values.split(","))
        if name == "country":
            parts = tuple("" if value.lower() == "unknown" else value.upper() for value in parts)
        filters[name] = parts
    return filters


__all__ = [
    "GROUPS",
    "PrunedRangeError",
    "Report",
    "ReportError",
    "ReportQuery",
    "TimeRangeError",
    "parse_filters",
    "report_range",
    "run_report",
]
