"""A time series per selected report row: a zone's (or a country x zone pair's) clicks, conversions,
cost, revenue, profit and ROI by local day, or by local hour over ranges of two days or less.

The series is the report itself grouped by the time first (models/reporting/reports.py, so it reads
what the report reads: the rollups where they answer exactly, else the columnar history plus the row
store's clicks not yet copied, exact up to the last landed click), filtered to the selected rows' values.
Its buckets are every local day or hour of the range as the report labels them (a repeated hour twice,
a skipped one not at all, half-hour offsets on their own hours), empty ones as zeros, so one row's
points add up to its report row.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time as time_module
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from peewee import Database

from models.reporting.history import HistoryFiles
from models.reporting.reports import (
    TIME_GROUPS,
    Report,
    ReportError,
    ReportQuery,
    campaign_ids,
    report_range,
    run_report,
    time_buckets,
)
from models.reporting.timerange import TimeRangeError, local_instant, zone
from models.store.reports import ReportStore
from models.tables.dimensions import DAY_MS, HOUR_MS, NAMED_GROUPS

SERIES_METRICS = ("clicks", "conversions", "cost", "revenue", "profit", "roi")
MONEY_SERIES_METRICS = frozenset({"cost", "revenue", "profit", "roi"})
MAX_SERIES_ROWS = 20  # Lines a chart can still tell apart; each is a filter value of the one query.
HOURLY_UP_TO_MS = 2 * DAY_MS  # A range this long or shorter is a series by hour.
MAX_SERIES_BUCKETS = 3700  # Ten years of days.


@dataclass
class SeriesLine:
    key: dict[str, Any]  # The selected row's group values, as its report row has them.
    values: dict[str, list]  # Metric -> one value per bucket (ROI None where nothing was spent).
    total: dict[str, Any]  # The same metrics over the whole range: the row's report numbers.


@dataclass
class Series:
    group_by: tuple[str, ...]
    time_group: str  # day or hour
    timezone: str
    currency: str
    buckets: list[tuple[str, int]]  # (local label, first instant in Unix ms), in time order.
    lines: list[SeriesLine]
    sources: list[str]
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "group_by": list(self.group_by),
            "time_group": self.time_group,
            "timezone": self.timezone,
            "currency": self.currency,
            "buckets": [{"label": label, "start_ms": start} for label, start in self.buckets],
            "series": [{"key": line.key, "values": line.values, "total": line.total} for line in self.lines],
            "sources": self.sources,
            "notes": self.notes,
        }

    def flat_rows(self) -> list[dict[str, Any]]:
        """One row per selected row and bucket (group values, the time label, the metrics): a table or CSV."""
        rows = []
        for line in self.lines:
            for index, (label, _) in enumerate(self.buckets):
                rows.append(
                    {
                        **line.key,
                        self.time_group: label,
                        **{metric: line.values[metric][index] for metric in SERIES_METRICS},
                    }
                )
        return rows

    @property
    def columns(self) -> list[str]:
        return [*self.group_by, self.time_group, *SERIES_METRICS]


def parse_rows(texts: tuple[str, ...] | list[str], groups: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Selected rows as written in the API and CLI: a row of a one-level report is its value as is
    (sub ids may hold commas); of several levels, a JSON array of its values in the levels' order."""
    if len(groups) == 1:
        return [(text,) for text in texts]
    rows = []
    for text in texts:
        try:
            values = json.loads(text)
        except ValueError:
            values = None
        if not isinstance(values, list) or not all(isinstance(v, (str, int)) for v in values):
            raise ReportError(
                f"A row of a report grouped by {', '.join(groups)} is a JSON array of its values, "
                f'such as ["US", "1234"], not {text[:40]!r}.'
            )
        rows.append(tuple(str(value) for value in values))
    return rows


def time_bounds(group: str, label: str, tz: ZoneInfo) -> tuple[int, int]:
    """The UTC bounds [start, end) of a day or hour row's label ("2026-12-01", "2026-12-01 13:00",
    "2026-10-25 02:00+01:00" for the second of a repeated hour)."""
    if group == "day":
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", label):
            raise TimeRangeError(f"{label!r} is not a day (YYYY-MM-DD).")
        return local_instant(label, tz, is_end=False), local_instant(label, tz, is_end=True)
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:00([+-]\d{2}:\d{2})?", label):
        raise TimeRangeError(f"{label!r} is not an hour (YYYY-MM-DD HH:00).")
    start = local_instant(label, tz, is_end=False)
    return start, start + HOUR_MS


def _normal(group: str, value: str) -> str:
    """A selected value as a filter takes it (and a report row's value prints, see _text)."""
    value = value.strip()
    if group == "country":
        return "" if value.lower() == "unknown" else value.upper()
    return value


def _text(group: str, value: Any) -> str:
    """A report row's group value as a selected row names it (an id group's none is 0)."""
    if value is None:
        return "0" if group in NAMED_GROUPS else ""
    return str(value)


def _filters(
    query: ReportQuery, rows: list[tuple[str, ...]], store: ReportStore
) -> dict[str, tuple[str, ...]]:
    """The report's filters narrowed to the selected rows' values, each level's; ReportError for a row
    outside a filter the report has (its series would be empty for no visible reason)."""
    filters = dict(query.filters)
    for index, group in enumerate(query.group_by):
        values = tuple(dict.fromkeys(row[index] for row in rows))
        if group in filters:
            kept = filters[group] if group != "campaign" else campaign_ids(store, filters[group])
            outside = [value for value in values if value not in kept]
            if outside:
                raise ReportError(f"The {group} {outside[0]!r} is outside the report's {group} filter.")
        filters[group] = values
    return filters


def _check(query: ReportQuery, rows: list[tuple[str, ...]]) -> None:
    if not query.group_by:
        raise ReportError("A series is of rows of a grouping; group the report by something.")
    if any(group in TIME_GROUPS for group in query.group_by):
        raise ReportError("A series is by day or hour already: choose rows of a grouping other than time.")
    if not rows:
        raise ReportError("Choose at least one row for a series.")
    if len(rows) > MAX_SERIES_ROWS:
        raise ReportError(f"Choose at most {MAX_SERIES_ROWS} rows for a series, not {len(rows)}.")
    for row in rows:
        if len(row) != len(query.group_by):
            raise ReportError(
                f"A row of a report grouped by {', '.join(query.group_by)} has {len(query.group_by)} "
                f"value{'s' if len(query.group_by) > 1 else ''}; {list(row)!r} has {len(row)}."
            )


def run_series(
    db: Database,
    query: ReportQuery,
    rows: list[tuple[str, ...]],
    *,
    now: float | None = None,
    history: HistoryFiles | None = None,
) -> Series:
    """The series of each selected row (its values in query.group_by's order) over query's range;
    ReportError (or TimeRangeError) saying what is wrong with the request."""
    _check(query, rows)
    rows = [
        tuple(_normal(group, value) for group, value in zip(query.group_by, row, strict=True)) for row in rows
    ]
    store = ReportStore(db.connection())
    if "campaign" in query.group_by:  # Aliases as ids: report rows name campaigns by id.
        index = query.group_by.index("campaign")
        ids = campaign_ids(store, tuple(row[index] for row in rows))
        rows = [(*row[:index], ids[n], *row[index + 1 :]) for n, row in enumerate(rows)]
    now = time_module.time() if now is None else now
    tz = zone(query.timezone)
    start, end = report_range(query, now=now)
    end = int(now * 1000) if end is None else end
    if start is not None:
        _check_length(start, end)
    time_group = "hour" if start is not None and end - start <= HOURLY_UP_TO_MS else "day"
    series_query = dataclasses.replace(
        query, group_by=(time_group, *query.group_by), filters=_filters(query, rows, store)
    )
    report = run_report(db, series_query, now=now, history=history)
    starts = {row[time_group]: time_bounds(time_group, row[time_group], tz)[0] for row in report.rows}
    if start is None:  # All time: from its first click's day.
        start = min(starts.values(), default=end)
        _check_length(start, end)
    if start < end:
        starts.update(time_buckets(time_group, tz, start, end))
    buckets = sorted(starts.items(), key=lambda item: item[1])
    return Series(
        group_by=query.group_by,
        time_group=time_group,
        timezone=tz.key,
        currency=report.currency,
        buckets=buckets,
        lines=_lines(report, query.group_by, time_group, rows, buckets),
        sources=report.sources,
        notes=report.notes,
    )


def _check_length(start: int, end: int) -> None:
    step = HOUR_MS if end - start <= HOURLY_UP_TO_MS else DAY_MS
    if (end - start) // step > MAX_SERIES_BUCKETS:
        raise ReportError(
            f"A series covers at most {MAX_SERIES_BUCKETS} days ({MAX_SERIES_BUCKETS // 365} years); "
            "choose a shorter period."
        )


def _lines(
    report: Report,
    groups: tuple[str, ...],
    time_group: str,
    rows: list[tuple[str, ...]],
    buckets: list[tuple[str, int]],
) -> list[SeriesLine]:
    position = {label: index for index, (label, _) in enumerate(buckets)}
    by_key: dict[tuple[str, ...], list[dict]] = {}
    for row in report.rows:
        by_key.setdefault(tuple(_text(g, row[g]) for g in groups), []).append(row)
    lines = []
    for selected in dict.fromkeys(rows):
        found = by_key.get(selected, [])
        values: dict[str, list] = {
            metric: [None if metric == "roi" else 0] * len(buckets) for metric in SERIES_METRICS
        }
        for row in found:
            for metric in SERIES_METRICS:
                values[metric][position[row[time_group]]] = row[metric]
        key: dict[str, Any] = dict(zip(groups, selected, strict=True))
        for group in groups:  # Names beside ids, as the report row has them.
            if found and f"{group}_name" in found[0]:
                key[f"{group}_name"] = found[0][f"{group}_name"]
        lines.append(SeriesLine(key=key, values=values, total=_total(values)))
    return lines


def _total(values: dict[str, list]) -> dict[str, Any]:
    total: dict[str, Any] = {metric: sum(v or 0 for v in values[metric]) for metric in SERIES_METRICS}
    for metric in ("cost", "revenue", "profit"):
        total[metric] = round(total[metric], 6)
    total["profit"] = round(total["revenue"] - total["cost"], 6)
    total["roi"] = round(total["profit"] / total["cost"] * 100, 4) if total["cost"] else None
    return total


__all__ = ["MAX_SERIES_ROWS", "SERIES_METRICS", "Series", "parse_rows", "run_series", "time_bounds"]
