"""The report builder, `/panel/reports`: up to three grouping levels drilled into one row at a time,
filters in the report language (`f.<name>=v1,v2`), date presets or a custom range in the user's
timezone, a column chooser, sort, a totals row, a chart of the level, and the level as CSV
(`/panel/reports.csv`). Every state is a URL; the numbers are the report routes/v1/reports.py answers,
limited by PanelReports to the campaigns the user may see.

A drill step (`d1`, `d2`) is the value of a row of the level above: it becomes an exact filter on
that level's group (replacing a filter on the same name), or for a day or hour the range narrowed to it.
"""

from __future__ import annotations

import csv
import io
import urllib.parse
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import falcon
from markupsafe import escape

from models.accounts.access import visible_campaign_ids, visible_lander_ids, visible_offer_ids
from models.admin.services import AdminError, get_offer, get_stream, list_campaigns
from models.admin.sources import get_source
from models.conversions.networks import get_network
from models.reporting.columnpages import REPORTS
from models.reporting.columnsets import remember_groups, remembered_groups
from models.reporting.reportpage import GROUP_KEY, PageQuery, cut_page
from models.reporting.reports import (
    GROUPS,
    LABEL_GROUP,
    REPORT_METRICS,
    TIME_GROUPS,
    ReportError,
    report_range,
    time_buckets,
)
from models.reporting.series import MAX_SERIES_ROWS, MONEY_SERIES_METRICS, SERIES_METRICS, time_bounds
from models.reporting.sourcenames import source_parameter_names
from models.reporting.timerange import TimeRangeError, zone
from models.tables.dimensions import DAY_MS, HOUR_MS, NAMED_GROUPS
from routes.api import CSV_CHUNK_ROWS, report_query
from routes.panel.columnsets import CONTROLS, ColumnSets, moved, sort_keys
from routes.panel.common import (
    PERIODS,
    PanelContext,
    PanelReports,
    PanelResource,
    report_notes,
    timezone_of,
)
from routes.panel.flash import Flash
from routes.panel.labels import label_column
from routes.panel.render import Renderer, money, percent, whole
from routes.panel.reportrows import table_rows
from routes.panel.session import PanelSessions
from routes.v1.spec import MONEY_FIELDS

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from models.accounts.principal import Principal
    from models.reporting.reports import Report
    from models.reporting.series import Series

MAX_LEVELS = 3
SHOWN_ROWS = 1000  # A level of sub ids can have a row per visitor: the page shows this many, the CSV all.
CHART_ROWS = 10
MAX_BUCKETS = 5000  # A longer time series is drawn from its rows only, empty buckets left out.
DEFAULT_PERIOD = "last_7_days"
PERIOD_LABELS = {
    **PERIODS,
    "this_week": "This week",
    "this_month": "This month",
    "last_month": "Last month",
    "custom": "Custom",
}
# The id groups a row with no id (none) drills into as 0.
PARENT_GROUPS = ("stream", "offer", "network", "traffic_source", "lander")
GROUP_LABELS = {
    "day": "Day",
    "hour": "Hour",
    "campaign": "Campaign",
    "stream": "Stream",
    "offer": "Offer",
    "network": "Network",
    "traffic_source": "Traffic source",
    "lander": "Lander",
    "source": "Source",
    "country": "Country",
    "device": "Device",
    "os": "OS",
    "browser": "Browser",
    "language": "Language",
    "referrer_domain": "Referrer domain",
    "domain": "Domain",
    **{name: name.replace("sub_id_", "Sub ID ") for name in GROUPS if name.startswith("sub_id_")},
}
METRIC_LABELS = {
    "clicks": "Clicks",
    "unique_clicks": "Unique",
    "unique_global": "Unique (global)",
    "unique_stream": "Unique (stream)",
    "bots": "Bots",
    "conversions": "Conv.",
    "leads": "Leads",
    "sales": "Sales",
    "rejected": "Rejected",
    "trash": "Trash",
    "rebills": "Rebills",
    "cr": "CR",
    "revenue": "Revenue",
    "revenue_pending": "Pending revenue",
    "cost": "Cost",
    "profit": "Profit",
    "roi": "ROI",
    "epc": "EPC",
    "cpc": "CPC",
    "cpa": "CPA",
    "lp_views": "LP views",
    "lp_clicks": "LP clicks",
    "lp_ctr": "LP CTR",
}
PERCENT_METRICS = frozenset({"cr", "roi", "lp_ctr"})
MONEY_METRICS = frozenset(name for name in REPORT_METRICS if name in MONEY_FIELDS)  # ROI too: it says profit.
AMOUNTS = MONEY_METRICS - PERCENT_METRICS  # In the report currency.
DEFAULT_COLUMNS = REPORTS.defaults
SINGLE_PARAMETERS = (
    "period",
    "from",
    "to",
    "sort",
    "order",
    "sort2",
    "order2",
    "filter",
    "value",
    *(f"g{n}" for n in range(1, MAX_LEVELS + 1)),
    *(f"d{n}" for n in range(1, MAX_LEVELS)),
)
CSV_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")  # A spreadsheet runs a cell starting so as a formula.
GROUP_SORT = GROUP_KEY  # models/reporting/reportpage.py sorts by it, as by a metric.
RATIOS = frozenset({"cr", "roi", "epc", "cpc", "cpa", "lp_ctr"})
EMPTY_TOTAL = {name: None if name in RATIOS else 0 for name in REPORT_METRICS}  # No campaign to count.


def bad_request(description: str) -> falcon.HTTPBadRequest:
    return falcon.HTTPBadRequest(title="Bad report query", description=description)


def metric_columns(principal: Principal) -> tuple[str, ...]:
    """The metrics `principal` may choose: all the report's, without amounts for a hide-money user."""
    return tuple(m for m in REPORT_METRICS if not (principal.hides_money and m in MONEY_METRICS))


@dataclass(frozen=True)
class BuilderState:
    """What a report builder URL says; `url()` writes it back (with changes), defaults left out."""

    period: str = DEFAULT_PERIOD
    since: str = ""
    until: str = ""
    groups: tuple[str, ...] = ("campaign",)
    drill: tuple[str, ...] = ()  # One value per level above the current one.
    filters: tuple[tuple[str, str], ...] = ()  # (group, values as written), in the URL's order.
    columns: tuple[str, ...] = DEFAULT_COLUMNS
    sort: str = ""  # A metric, GROUP_SORT, or "": the group's time order, else clicks.
    order: str = ""  # asc or desc; "": desc for a metric, asc for the group.
    selected: tuple[str, ...] = ()  # Rows of the current level whose time series is charted (`row`).
    sort2: str = ""  # The second key: rows equal on the first in its order ("": as they come).
    order2: str = ""
    base_columns: tuple[str, ...] = DEFAULT_COLUMNS  # What no `col` shows (the user's default set's).

    @property
    def level(self) -> int:
        return len(self.drill)

    @property
    def group(self) -> str:
        return self.groups[self.level]

    @property
    def sort_key(self) -> str:
        if self.sort:
            return self.sort
        return (
            GROUP_SORT if self.group in TIME_GROUPS else "clicks" if "clicks" in self.columns else GROUP_SORT
        )

    @property
    def sort_order(self) -> str:
        return self.order or ("asc" if self.sort_key == GROUP_SORT else "desc")

    @property
    def sort2_order(self) -> str:
        return self.order2 or ("asc" if self.sort2 == GROUP_SORT else "desc")

    @property
    def sort_text(self) -> str:
        """The sort as a column set keeps it: `-profit,group`."""
        keys = [(self.sort_key, self.sort_order)] + ([(self.sort2, self.sort2_order)] if self.sort2 else [])
        return ",".join(("-" if order == "desc" else "") + key for key, order in keys)

    def pairs(self) -> list[tuple[str, str]]:
        pairs = [("period", self.period)] if self.period != DEFAULT_PERIOD else []
        if self.period == "custom":
            pairs += [(name, value) for name, value in (("from", self.since), ("to", self.until)) if value]
        pairs += [(f"g{n}", group) for n, group in enumerate(self.groups, 1)]
        pairs += [(f"d{n}", value) for n, value in enumerate(self.drill, 1)]
        pairs += [(f"f.{name}", values) for name, values in self.filters]
        if self.columns != self.base_columns:
            pairs += [("col", name) for name in self.columns]
        sorts = (("sort", self.sort), ("order", self.order), ("sort2", self.sort2), ("order2", self.order2))
        pairs += [(name, value) for name, value in sorts if value]
        pairs += [("row", value) for value in self.selected]
        return pairs

    def url(self, path: str = "/panel/reports", **changes) -> str:
        if ("drill" in changes or "groups" in changes) and "selected" not in changes:
            changes["selected"] = ()  # The rows ticked are of this level only.
        return path + "?" + urllib.parse.urlencode(replace(self, **changes).pairs())

    def report_params(self) -> dict[str, str]:
        """The report language's parameters for the current level (its drill steps apart)."""
        params = {"group": self.group, **{f"f.{name}": values for name, values in self.filters}}
        if self.period == "custom":
            params.update(
                {name: value for name, value in (("from", self.since), ("to", self.until)) if value}
            )
        else:
            params["preset"] = self.period
        return params


@dataclass(frozen=True)
class BuilderBase:
    """What a URL without them shows: the user's default set's columns and sort; and on a bare visit
    (no query at all), the grouping the user last showed (or the default set's)."""

    columns: tuple[str, ...] = ()
    sort: str = ""  # A set's sort text.
    groups: tuple[str, ...] = ()


def parse_state(
    query_string: str,
    principal: Principal,
    source_names: tuple[str, ...] = (),
    base: BuilderBase = BuilderBase(),
) -> tuple[BuilderState, tuple[str, str] | None]:
    """The builder's state from a query string, and a filter to add ((name, values) from the form's
    `filter`/`value` fields: the caller redirects to the state with it); 400 for anything else.
    `source_names`: the traffic sources' parameter names, groups besides GROUPS (zoneid); `base`: what
    a query without columns, sort or groups shows."""
    known = (*GROUPS, *source_names)
    given: dict[str, str] = {}
    filters: dict[str, str] = {}
    columns: list[str] = []
    selected: list[str] = []
    # parse_qsl, not Falcon's params: a drill step may be an empty value (a visitor without a country).
    for name, value in urllib.parse.parse_qsl(query_string, keep_blank_values=True):
        if name == "col":
            columns += [part for part in value.split(",") if part]
        elif name == "row":
            selected.append(value)
        elif name.startswith("f.") and len(name) > 2:
            if name[2:] in filters:
                raise bad_request(f"Give {name!r} once.")
            filters[name[2:]] = value
        elif name in SINGLE_PARAMETERS:
            if name in given:
                raise bad_request(f"Give {name!r} once.")
            given[name] = value
        else:
            raise bad_request(
                f"Unknown parameter {name!r}; use {', '.join(SINGLE_PARAMETERS)}, col, row or f.<name> "
                "filters."
            )
    since, until = given.get("from", "").strip(), given.get("to", "").strip()
    period = given.get("period") or ("custom" if since or until else DEFAULT_PERIOD)
    if period not in PERIOD_LABELS:
        raise bad_request(f"The period is one of {', '.join(PERIOD_LABELS)}.")
    if period == "custom" and not since:
        raise bad_request("A custom period needs a from date.")
    if not query_string and base.groups and all(g in known for g in base.groups):  # A bare visit.
        given.update({f"g{n}": group for n, group in enumerate(base.groups[:MAX_LEVELS], 1)})
    groups = (
        given.get("g1") or "campaign",
        *(given[f"g{n}"] for n in range(2, MAX_LEVELS + 1) if given.get(f"g{n}")),
    )
    for name in groups:
        if name not in known:
            raise bad_request(
                f"Cannot group by {name!r}; use {', '.join(TIME_GROUPS)}, campaign, stream, offer, network, "
                "source, country, device, os, browser, language, sub_id_1 to sub_id_30, referrer_domain, "
                "domain."
            )
    if len(set(groups)) < len(groups):
        raise bad_request("Group by each name at one level only.")
    drill = tuple(given[f"d{n}"] for n in range(1, MAX_LEVELS) if f"d{n}" in given)
    if any(f"d{n}" not in given for n in range(1, len(drill) + 1)):
        raise bad_request("A drill-down starts at the first level (d1).")
    if len(drill) >= len(groups):
        raise bad_request(
            f"There are {len(groups)} grouping levels; a drill-down picks a row of one above the last."
        )
    choosable = metric_columns(principal)
    for name in columns:
        if name not in choosable:
            raise bad_request(f"{name!r} is no column here; choose from {', '.join(choosable)}.")
    base_columns = tuple(c for c in base.columns if c in choosable) or tuple(
        c for c in DEFAULT_COLUMNS if c in choosable
    )
    columns_chosen = tuple(dict.fromkeys(columns)) or base_columns
    is_unsorted = not any(name in given for name in ("sort", "order", "sort2", "order2"))
    if not columns and is_unsorted and base.sort:  # The default set's columns, with its sort.
        keys = [
            (key, "desc" if is_descending else "asc")
            for key, is_descending in sort_keys(base.sort)
            if key == GROUP_SORT or key in columns_chosen
        ][:2]
        for n, (key, order) in enumerate(keys):
            given.update({("sort", "sort2")[n]: key, ("order", "order2")[n]: order})
    sort, order = given.get("sort", ""), given.get("order", "")
    sort2, order2 = given.get("sort2", ""), given.get("order2", "")
    for key in (sort, sort2):
        if key and key != GROUP_SORT and key not in columns_chosen:
            raise bad_request(f"Sort by the group or a column shown: {', '.join(columns_chosen)}.")
    if sort2 and sort2 == (sort or "clicks"):
        raise bad_request("The second sort key is another column than the first.")
    if order not in ("", "asc", "desc") or order2 not in ("", "asc", "desc"):
        raise bad_request("The order is asc or desc.")
    state = BuilderState(
        period,
        since if period == "custom" else "",
        until if period == "custom" else "",
        groups,
        drill,
        tuple(filters.items()),
        columns_chosen,
        sort,
        order,
        tuple(dict.fromkeys(selected)),
        sort2,
        order2,
        base_columns,
    )
    if state.selected and state.group in TIME_GROUPS:
        raise bad_request("A day or hour row is a time already: chart rows of another grouping.")
    if len(state.selected) > MAX_SERIES_ROWS:
        raise bad_request(f"Chart at most {MAX_SERIES_ROWS} rows at once, not {len(state.selected)}.")
    added = None
    if given.get("filter"):
        added = (given["filter"], given.get("value", "").strip())
        if added[0] not in known or added[0] in TIME_GROUPS:
            raise bad_request(f"Cannot filter by {added[0]!r}; filter time with the period.")
    return state, added


def iso(ms: int, tz: ZoneInfo) -> str:
    return datetime.fromtimestamp(ms / 1000, tz).isoformat(timespec="seconds")


class ReportBuilder:
    """Runs a builder state's current level for a principal: the report, its rows in the chosen order,
    and what the page shows about the drill path."""

    def __init__(self, db, reports: PanelReports) -> None:
        self.db = db
        self.reports = reports

    def level_report(self, state: BuilderState, principal: Principal) -> Report | None:
        return self.reports.report(principal, *self.level_params(state, principal))

    def level_page(
        self,
        state: BuilderState,
        principal: Principal,
        campaigns: dict[int, tuple[str, str]],
        without: set[str],
    ) -> Report | None:
        """The rows of the current level the page shows, in its order, with the count of every row, the
        totals and the total less the ticked rows (`without`): summed, sorted and cut by DuckDB where the
        columnar history answers (models/reporting/reportpage.py). A day or hour level is the whole
        report (its chart draws every row), sorted here by the same rule."""
        group = state.group
        sort = ((state.sort_key, state.sort_order == "desc"),) + (
            ((state.sort2, state.sort2_order == "desc"),) if state.sort2 else ()
        )
        page = PageQuery(
            sort=sort,
            limit=SHOWN_ROWS,
            without=tuple(sorted(without)),
            label=lambda value, name: display(group, value, {f"{group}_name": name}, campaigns)[0],
        )
        if group in TIME_GROUPS:
            report = self.level_report(state, principal)
            if report is None:
                return None
            params, _ = self.level_params(state, principal)
            query = report_query({**params, "timezone": timezone_of(principal)})
            return cut_page(report, query, replace(page, limit=max(len(report.rows), 1)))
        return self.reports.page(principal, *self.level_params(state, principal), page)

    def level_stream(self, state: BuilderState, principal: Principal):
        """The current level's report as a stream of rows (a CSV's), or None."""
        return self.reports.stream(principal, *self.level_params(state, principal))

    def level_series(self, state: BuilderState, principal: Principal) -> Series | None:
        """The time series of the level's ticked rows (None: none ticked, or no campaign to count)."""
        if not state.selected:
            return None
        params, exact = self.level_params(state, principal)
        return self.reports.series(principal, params, exact, [(value,) for value in state.selected])

    def level_params(
        self, state: BuilderState, principal: Principal
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The report language's parameters of the current level, and its drill steps as exact filters
        (a day or hour drilled into narrows the range instead)."""
        params = state.report_params()
        exact: dict[str, str] = {}
        time_drills = [
            (group, value)
            for group, value in zip(state.groups, state.drill, strict=False)
            if group in TIME_GROUPS
        ]
        for group, value in zip(state.groups, state.drill, strict=False):
            if group not in TIME_GROUPS:
                exact[group] = value
        if time_drills:
            tz = zone(timezone_of(principal))
            try:
                start, end = report_range(report_query({**params, "timezone": tz.key}))
                for group, value in time_drills:
                    row_start, row_end = time_bounds(group, value, tz)
                    start = row_start if start is None else max(start, row_start)
                    end = row_end if end is None else min(end, row_end)
            except (ReportError, TimeRangeError) as exc:
                raise bad_request(str(exc)) from None
            if start is None or end is None or start >= end:  # None: not after a time drill.
                raise bad_request("The drill-down's day or hour is outside the period.")
            params = {name: value for name, value in params.items() if name != "preset"}
            params.update({"from": iso(start, tz), "to": iso(end, tz)})
        return params, exact

    def campaign_names(self, principal: Principal) -> dict[int, tuple[str, str]]:
        """Id -> (name, alias) of the campaigns `principal` may see."""
        visible = visible_campaign_ids(self.db, principal)
        return {
            c.id: (c.name, c.alias)
            for c in list_campaigns(self.db, include_archived=True)
            if visible is None or c.id in visible
        }

    def rows(
        self, state: BuilderState, report: Report | None, campaigns: dict[int, tuple[str, str]]
    ) -> list[dict]:
        """The report's rows as the table shows them, in its order (level_page's: sorted already)."""
        group = state.group
        rows: list[dict[str, Any]] = []
        for row in report.rows if report else []:
            value = row[group]
            label, sub = display(group, value, row, campaigns)
            if value is None:
                drill_value = "0" if group in PARENT_GROUPS else None
            else:
                drill_value = str(value)
            rows.append({"label": label, "sub": sub, "value": drill_value, "stats": row})
        return rows

    def breadcrumb(self, state: BuilderState, campaigns: dict, principal: Principal) -> list[dict]:
        steps = [{"label": "All", "href": state.url(drill=())}]
        for index, value in enumerate(state.drill):
            group = state.groups[index]
            label = self.drill_label(group, value, campaigns, principal)
            steps.append(
                {
                    "label": f"{GROUP_LABELS.get(group, group)}: {label}",
                    "href": state.url(drill=state.drill[: index + 1]),
                }
            )
        return steps

    def drill_label(self, group: str, value: str, campaigns: dict, principal: Principal) -> str:
        """A drill step's value as the row showed it; an id's name only where the user may see it (a
        drill step is the URL's: one naming another buyer's offer or lander gets its id, not its name)."""
        if group in ("offer", "lander") and value.isdigit() and value != "0":
            seen = (visible_offer_ids if group == "offer" else visible_lander_ids)(self.db, principal)
            if seen is not None and int(value) not in seen:
                return f"#{value}"
        if group == "campaign":
            return campaigns[int(value)][0] if value.isdigit() and int(value) in campaigns else f"#{value}"
        if group in PARENT_GROUPS:
            if not value.isdigit() or value == "0":
                return "(none)"
            if group == "lander":
                from models.tables.lander import Lander

                lander = Lander.get_or_none(Lander.id == int(value))
                return lander.name if lander else f"#{value}"
            try:
                if group == "offer":
                    return get_offer(int(value)).name
                if group == "network":
                    return get_network(self.db, int(value)).name
                if group == "traffic_source":
                    return get_source(self.db, int(value)).name
                stream = get_stream(self.db, int(value))
            except AdminError:
                return f"#{value}"
            return stream.name if stream.campaign_id in campaigns else f"#{value}"
        return display(group, value, {}, campaigns)[0]


def display(group: str, value, row: dict, campaigns: dict[int, tuple[str, str]]) -> tuple[str, str]:
    """A group value as a row shows it: (label, the small text under it)."""
    if group == "campaign":
        name, alias = campaigns.get(value, (row.get("campaign_name") or f"#{value}", ""))
        return (name, alias) if value is not None else ("(none)", "")
    if group in NAMED_GROUPS:
        return (row.get(f"{group}_name") or f"#{value}", "") if value is not None else ("(none)", "")
    if value is None:
        return "(none)", ""
    if value == "":
        return ("unknown" if group == "country" else "(empty)"), ""
    return str(value), ""


def cell(metric: str, value, currency: str) -> str:
    if metric in PERCENT_METRICS:
        return percent(value)
    if metric in AMOUNTS:
        return money(value, currency)
    return whole(value)


def csv_number(metric: str, value) -> str:
    """The number a cell shows, without separators or currency (a spreadsheet reads it)."""
    if value is None:
        return ""
    if metric in PERCENT_METRICS:
        return f"{value:.1f}"
    if metric in AMOUNTS:
        return f"{value:.2f}"
    return str(round(value))


def csv_text(value: str) -> str:
    """A text cell a spreadsheet shows as text: one starting like a formula gets a leading quote."""
    return "'" + value if value.startswith(CSV_TRIGGERS) else value


def metric_header(metric: str, currency: str) -> str:
    return f"{METRIC_LABELS[metric]} ({currency})" if metric in AMOUNTS else METRIC_LABELS[metric]


def chart_buckets(report: Report | None, group: str, tz: ZoneInfo) -> list[tuple[str, int]]:
    """(label, first instant) of each day or hour the time chart draws, in time order: every bucket of
    the report's range in `tz` as time_buckets makes them (the dashboard's: a repeated hour twice, a
    skipped one not at all), those without clicks too; only the rows' own when the range is open or
    longer than MAX_BUCKETS."""
    if report is None:
        return []
    starts = {row[group]: time_bounds(group, row[group], tz)[0] for row in report.rows}
    step = HOUR_MS if group == "hour" else DAY_MS
    if report.start_ms is not None and report.end_ms is not None:
        if (report.end_ms - report.start_ms) // step <= MAX_BUCKETS:
            starts.update(time_buckets(group, tz, report.start_ms, report.end_ms))
    return sorted(starts.items(), key=lambda item: item[1])


def chart_data(
    state: BuilderState, rows: list[dict], report: Report | None, currency: str, tz: ZoneInfo
) -> dict:
    """What panel.js draws above the table: a time series of the level in time order (day, hour), or
    bars of its first rows as sorted; the metric is the sorted one (clicks when sorted by the group)."""
    metric = (
        state.sort_key
        if state.sort_key != GROUP_SORT
        else ("clicks" if "clicks" in state.columns else state.columns[0])
    )
    label = metric_header(metric, currency)
    if state.group in TIME_GROUPS:
        by_label = {row[state.group]: row for row in (report.rows if report else [])}
        buckets = chart_buckets(report, state.group, tz)
        empty = None if metric in RATIOS else 0  # A bucket without clicks has no CR, but 0 clicks.
        return {
            "kind": "time",
            "metric": metric,
            "label": label,
            "is_money": metric in AMOUNTS,
            "x": [start_ms // 1000 for _, start_ms in buckets],  # Each bucket's first instant (unix s).
            "values": [
                empty if by_label.get(text, {}).get(metric) is None else round(by_label[text][metric], 2)
                for text, _ in buckets
            ],
            "timezone": tz.key,  # panel.js labels the axis in it.
        }
    top = rows[:CHART_ROWS]
    return {
        "kind": "bars",
        "group": GROUP_LABELS.get(state.group, state.group),
        "metric": metric,
        "label": label,
        "is_money": metric in AMOUNTS,
        "labels": [row["label"] for row in top],
        "values": [round(row["stats"].get(metric) or 0, 2) for row in top],
    }


def series_data(
    state: BuilderState, series: Series | None, principal: Principal, campaigns: dict[int, tuple[str, str]]
) -> dict | None:
    """What panel.js draws under the level's chart for its ticked rows: one line a row, of the metric
    chosen in #series-metric (amounts left out for a user who hides money), and each row's totals."""
    if series is None:
        return None
    metrics = [m for m in SERIES_METRICS if not (principal.hides_money and m in MONEY_SERIES_METRICS)]
    group = state.group
    lines = []
    for line in series.lines:
        value = line.key[group]
        shown = int(value) if group in NAMED_GROUPS and value.isdigit() else value
        label, _ = display(
            group, None if shown in (0, "0") and group in NAMED_GROUPS else shown, line.key, campaigns
        )
        lines.append(
            {
                "label": label,
                "values": {m: line.values[m] for m in metrics},
                "total": {m: line.total[m] for m in metrics},
            }
        )
    return {
        "time_group": series.time_group,
        "x": [start_ms // 1000 for _, start_ms in series.buckets],
        "timezone": series.timezone,
        "currency": series.currency,
        "metrics": [
            {
                "name": m,
                "label": metric_header(m, series.currency),
                "is_money": m in AMOUNTS,
                "is_percent": m in PERCENT_METRICS,
            }
            for m in metrics
        ],
        "lines": lines,
    }


def period_links(state: BuilderState) -> list[tuple[str, str, str]]:
    """(period, label, URL) of each preset: the same report over that period; a drill step into a day
    or hour is left, since it may lie outside it."""
    drill = state.drill
    for index, group in enumerate(state.groups[: len(drill)]):
        if group in TIME_GROUPS:
            drill = drill[:index]
            break
    return [
        (key, label, state.url(period=key, since="", until="", drill=drill))
        for key, label in PERIOD_LABELS.items()
        if key != "custom"
    ]


def sort_links(state: BuilderState) -> dict[str, str]:
    """Column -> the URL sorting by it: descending first for a metric, ascending for the group; again
    to flip. Another column's click makes the first key so far the second (as the lists' headers)."""
    links = {}
    for name in (GROUP_SORT, *state.columns):
        first = "asc" if name == GROUP_SORT else "desc"
        flipped = "desc" if first == "asc" else "asc"
        if state.sort_key == name:
            order = flipped if state.sort_order == first else first
            links[name] = state.url(sort=name, order=order)
        else:
            links[name] = state.url(sort=name, order=first, sort2=state.sort_key, order2=state.sort_order)
    return links


def read_builder(
    req: falcon.Request, principal: Principal, sets: ColumnSets, names: tuple[str, ...], *, is_page: bool
) -> tuple[BuilderState, tuple[str, str] | None, set[str]]:
    """The state a builder request asks for (its base: the user's default set and last grouping), the
    filter it adds, and the values of the rows ticked to leave out of the summary (`without`). On the
    page, `?set=` and the column chooser's buttons answer a redirect to the state they make."""
    pairs = urllib.parse.parse_qsl(req.query_string, keep_blank_values=True)
    controls = {name: value for name, value in pairs if name in CONTROLS}
    without = {value for name, value in pairs if name == "without"}
    if len(without) > SHOWN_ROWS:
        raise bad_request(f"Tick at most {SHOWN_ROWS} rows to leave out of the total.")
    rest = [(name, value) for name, value in pairs if name not in CONTROLS and name != "without"]
    chosen = sets.default(principal)
    remembered = remembered_groups(sets.db, principal.user_id) if principal.user_id is not None else ()
    base = BuilderBase(
        chosen.columns if chosen else (),
        chosen.sort if chosen else "",
        remembered or (chosen.groups if chosen else ()),
    )
    state, added = parse_state(urllib.parse.urlencode(rest), principal, names, base)
    if not is_page:
        return state, added, without
    if controls.get("set"):
        picked = sets.picked(principal, controls["set"])
        changed = replace(
            state, columns=picked.columns or state.columns, sort="", order="", sort2="", order2=""
        )
        keys = [k for k in sort_keys(picked.sort) if k[0] == GROUP_SORT or k[0] in changed.columns][:2]
        sorting = {"sort": changed.sort_key}
        for n, (key, is_descending) in enumerate(keys):
            sorting |= {("sort", "sort2")[n]: key, ("order", "order2")[n]: "desc" if is_descending else "asc"}
        known = (*GROUPS, *names)
        groups = picked.groups if picked.groups and all(g in known for g in picked.groups) else state.groups
        drill = state.drill if groups == state.groups else ()
        raise falcon.HTTPSeeOther(changed.url(groups=groups, drill=drill, **sorting))
    if controls.get("move") or controls.get("add"):
        columns = moved(
            state.columns, controls.get("move", ""), controls.get("add", ""), metric_columns(principal)
        )
        kept = {
            "sort": state.sort if state.sort in (GROUP_SORT, *columns) else "",
            "sort2": state.sort2 if state.sort2 in (GROUP_SORT, *columns) else "",
        }
        kept |= {
            "order": state.order if kept["sort"] else "",
            "order2": state.order2 if kept["sort2"] else "",
        }
        raise falcon.HTTPSeeOther(state.url(columns=columns, **kept))
    if principal.user_id is not None:
        remember_groups(sets.db, principal.user_id, state.groups)
    return state, added, without


class ReportBuilderPage(PanelResource):
    """`GET /panel/reports`: the builder's form, the drill path, the chart and the level's table."""

    def __init__(
        self, sessions: PanelSessions, render: Renderer, builder: ReportBuilder, sets: ColumnSets
    ) -> None:
        super().__init__(sessions, render)
        self.builder = builder
        self.sets = sets

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        principal = session.principal
        names = tuple(source_parameter_names())
        state, added, without = read_builder(req, principal, self.sets, names, is_page=True)
        if added is not None:  # The form's "add a filter": the same state with it, as a URL of its own.
            kept = tuple((name, values) for name, values in state.filters if name != added[0])
            raise falcon.HTTPSeeOther(state.url(filters=(*kept, added)))
        campaigns = self.builder.campaign_names(principal)
        report = self.builder.level_page(state, principal, campaigns, without)
        series = self.builder.level_series(state, principal)
        rows = self.builder.rows(state, report, campaigns)
        currency = report.currency if report else self.builder.reports.report_currency
        is_last = state.level == len(state.groups) - 1
        shown = rows[:SHOWN_ROWS]
        labelling = label_column(
            self.builder.db,
            principal,
            state.group,
            state.groups,
            state.drill,
            state.filters,
            [row["value"] for row in shown if row["value"]],
        )
        total = report.total if report else EMPTY_TOTAL
        ticked = {row["value"] for row in shown if row["value"] is not None and row["value"] in without}
        can_chart_rows = state.group not in TIME_GROUPS
        shows_gaps = not principal.hides_money  # A gap's note names payouts.
        self.page(
            req,
            resp,
            "reports.html",
            session,
            state=state,
            periods=PERIOD_LABELS,
            group_labels={**GROUP_LABELS, **{n: n for n in names}},
            groups=tuple(name for name in (*GROUPS, *names) if name != LABEL_GROUP),
            metric_labels=METRIC_LABELS,
            choosable=metric_columns(principal),
            max_levels=MAX_LEVELS,
            rows=shown,
            row_html=table_rows(
                shown,
                columns=state.columns,
                selected=state.selected,
                drill=drill_parts(state),
                currency=currency,
                percents=PERCENT_METRICS,
                amounts=AMOUNTS,
                ticked=ticked,
                labelling=labelling,
                can_chart_rows=can_chart_rows,
                is_last=is_last,
                shows_gaps=shows_gaps,
            ),
            labelling=labelling,
            pushed=Flash(self.sessions).take(req, resp, session),  # A blacklist push's answer.
            row_count=report.row_count if report and report.row_count is not None else len(rows),
            shown_rows=SHOWN_ROWS,
            total=total,
            ticked=ticked,
            total_less=report.total_less if report else None,
            chooser=self.sets.chooser(
                principal, METRIC_LABELS, state.columns, state.sort_text, state.url(), state.groups
            ),
            currency=currency,
            cell=cell,
            header=metric_header,
            is_last=is_last,
            breadcrumb=self.builder.breadcrumb(state, campaigns, principal),
            chart=chart_data(state, rows, report, currency, zone(timezone_of(principal))),
            series=series_data(state, series, principal, campaigns),
            can_chart_rows=can_chart_rows,
            max_series_rows=MAX_SERIES_ROWS,
            notes=[] if report is None else report_notes(report, principal.hides_money),
            shows_gaps=shows_gaps,
            raw_reason=report.raw_reason if report else None,
            fallback=report.fallback if report else None,
            csv_url=state.url("/panel/reports.csv"),
            period_links=period_links(state),
            sort_links=sort_links(state),
        )


class ReportCsvResource(PanelResource):
    """`GET /panel/reports.csv`: the level the page shows, every row, the same columns and a totals row,
    streamed as it is read (models/reporting/reportstream.py: rows in the groups' order, not the page's
    sort). Each drill step and filter is a column of its own before the level's, so a drilled-down
    file says what it counts."""

    def __init__(
        self, sessions: PanelSessions, render: Renderer, builder: ReportBuilder, sets: ColumnSets
    ) -> None:
        super().__init__(sessions, render)
        self.builder = builder
        self.sets = sets

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        principal = session.principal
        state, _, _ = read_builder(req, principal, self.sets, tuple(source_parameter_names()), is_page=False)
        stream = self.builder.level_stream(state, principal)  # First: a bad drill step is its 400.
        campaigns = self.builder.campaign_names(principal)
        scope = [
            (GROUP_LABELS.get(group, group), self.builder.drill_label(group, value, campaigns, principal))
            for group, value in zip(state.groups, state.drill, strict=False)
        ] + [(f"{GROUP_LABELS.get(name, name)} filter", values) for name, values in state.filters]
        resp.content_type = "text/csv; charset=utf-8"
        resp.set_header("Cache-Control", "no-store")
        resp.set_header("X-Content-Type-Options", "nosniff")
        name = "-".join(["lanner-report", *state.groups[: state.level + 1], state.period])
        resp.set_header("Content-Disposition", f'attachment; filename="{name}.csv"')
        currency = stream.currency if stream else self.builder.reports.report_currency
        # Only a report with conversions waiting for a rate has the two columns saying which, per row.
        gaps = bool(stream and stream.unconverted) and not principal.hides_money
        resp.stream = self.lines(state, stream, campaigns, scope, currency, gaps)

    @staticmethod
    def lines(
        state: BuilderState,
        stream,
        campaigns: dict,
        scope: list[tuple[str, str]],
        currency: str,
        gaps: bool = False,
    ):
        out = io.StringIO()
        writer = csv.writer(out)
        fixed = [csv_text(value) for _, value in scope]
        label = GROUP_LABELS.get(state.group, state.group)
        writer.writerow(
            [*(name for name, _ in scope), label, *(metric_header(m, currency) for m in state.columns)]
            + (list(GAP_HEADERS) if gaps else [])
        )
        for count, row in enumerate(stream.rows if stream else (), 1):
            shown, _ = display(state.group, row[state.group], row, campaigns)
            writer.writerow(
                [*fixed, csv_text(shown), *(csv_number(m, row.get(m)) for m in state.columns)]
                + (gap_cells(row) if gaps else [])
            )
            if count % CSV_CHUNK_ROWS == 0:
                yield out.getvalue().encode()
                out.seek(0)
                out.truncate()
        total = (stream.total if stream else None) or EMPTY_TOTAL
        writer.writerow(
            [*fixed, "Total", *(csv_number(m, total.get(m)) for m in state.columns)]
            + (gap_cells(total) if gaps else [])
        )
        yield out.getvalue().encode()


GAP_HEADERS = ("Conversions without a rate", "Without a rate")


def gap_cells(row: dict) -> list:
    """A CSV row's count of conversions waiting for a rate and the sentence naming them."""
    return [row.get("unconverted") or 0, csv_text(row.get("unconverted_note") or "")]


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    builder = ReportBuilder(panel.db, panel.reports)
    sets = ColumnSets(panel.db, REPORTS)
    app.add_route("/panel/reports", ReportBuilderPage(panel.sessions, panel.render, builder, sets))
    app.add_route("/panel/reports.csv", ReportCsvResource(panel.sessions, panel.render, builder, sets))


def drill_parts(state: BuilderState, path: str = "/panel/reports") -> tuple[str, str]:
    """The escaped drill URL of a row around its value (before it, after it): the value goes between
    them URL-quoted, as state.url(drill=state.drill + (value,)) would put it."""
    pairs = replace(state, drill=(*state.drill, ""), selected=()).pairs()
    name = f"d{len(state.drill) + 1}"
    index = next(n for n, (key, _) in enumerate(pairs) if key == name)
    before = urllib.parse.urlencode(pairs[:index])
    after = urllib.parse.urlencode(pairs[index + 1 :])
    return str(escape(path + "?" + before + "&" + name + "=")), str(escape("&" + after)) if after else ""
