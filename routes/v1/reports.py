"""Reports: the grouping, filter and metric language of `lanner report` and /api/report (routes/api.py),
and a time series per selected row of one (models/reporting/series.py)."""

from __future__ import annotations

import falcon

from models.admin.services import get_campaign
from models.reporting.history import HistoryFiles
from models.reporting.notes import without_money_notes
from models.reporting.reportpage import MAX_PAGE_ROWS, PageQuery, page_report
from models.reporting.reports import ReportError
from models.reporting.reportstream import stream_report
from models.reporting.series import MAX_SERIES_ROWS, parse_rows, run_series
from routes.api import (
    FORMATS,
    check_report_parameters,
    report_from_parameters,
    report_query,
    run_report_query,
    send_report_csv,
    send_rows_csv,
)
from routes.v1.auth import visible_campaigns
from routes.v1.spec import MONEY_FIELDS, Operation, Param, answer, api_resource

REPORT_PARAMS = (
    Param(
        "group",
        "Grouping levels, comma-separated: campaign, stream, offer, lander, country, day, hour, sub_id_1 ...",
    ),
    Param("preset", "today, yesterday, last_7_days, last_30_days, this_week, this_month, last_month ..."),
    Param("from", "Local date or date-time, inclusive (instead of preset)."),
    Param("to", "Local date or date-time, exclusive."),
    Param("timezone", "IANA name (default UTC)."),
    Param("campaign", "Campaign ids or aliases, comma-separated (as f.campaign=)."),
    Param("format", " or ".join(FORMATS) + " (CSV also for Accept: text/csv; streamed as it is read)"),
)
NAMES = tuple(p.name for p in REPORT_PARAMS)
PAGE_PARAMS = (
    Param(
        "sort",
        "Sort keys, comma-separated, at most two: a metric (clicks, roi ...) or `group` (one grouping "
        "level), `-` before one for descending (`-clicks,roi`); ties keep the report's order.",
    ),
    Param("limit", f"Rows of one page, 1 to {MAX_PAGE_ROWS}: the answer adds `row_count`, every row's."),
    Param("offset", "Rows to skip before the page (default 0)."),
)
PAGE_NAMES = tuple(p.name for p in PAGE_PARAMS)


@api_resource
class ReportResource:
    operations = {
        "GET": Operation(
            "A report; filters as f.<name>=v1,v2 (e.g. f.country=US,GB). Any other parameter is refused. "
            "With sort, limit or offset, one page of it: its rows in that order, `row_count` (every "
            "row's) and the totals over every row (summed, sorted and cut by DuckDB where the columnar "
            "history answers).",
            params=(*REPORT_PARAMS, *PAGE_PARAMS, Param("f.<name>", "A filter on a grouping name.")),
            open_query=True,
        )
    }

    def __init__(self, auth, db, report_currency: str, history: HistoryFiles | None = None) -> None:
        self.auth, self.db, self.report_currency = auth, db, report_currency
        self.history = history  # The columnar history's files (None: the rollups and row store only).

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        params = single_params(req)
        check_report_parameters(params, (*NAMES, *PAGE_NAMES))
        check_visible(req, self.db, params)
        hides_money = req.context.principal.hides_money
        page = page_of({name: params.pop(name) for name in PAGE_NAMES if name in params})
        if page is not None and hides_money and any(key in MONEY_FIELDS for key, _ in page.sort):
            raise falcon.HTTPBadRequest(title="Bad report page", description="Sort by a column you may see.")
        if page is not None:
            if wants_csv(req, params):
                raise falcon.HTTPBadRequest(
                    title="Bad report query",
                    description="A CSV holds every row: give no sort, limit or offset.",
                )
            query = report_query(params, self.report_currency)
            paged = run_report_query(
                self.db,
                query,
                self.history,
                run=lambda db, q, history: page_report(db, q, page, history=history),
            )
            answer(req, resp, paged.as_json())
            return
        if wants_csv(req, params):
            query = report_query(params, self.report_currency)
            stream = run_report_query(self.db, query, self.history, run=stream_report)
            columns = [c for c in stream.columns if not (hides_money and c in MONEY_FIELDS)]
            send_report_csv(resp, stream, columns, hides_money)
            return
        report = report_from_parameters(self.db, params, self.report_currency, self.history)
        answer(req, resp, report.as_json())


def page_of(given: dict[str, str]) -> PageQuery | None:
    """The page `sort`, `limit` and `offset` ask for (None: none given, the whole report); 400 for a
    malformed one (run_report_query answers 400 for keys it does not know)."""
    if not given:
        return None
    numbers = {}
    for name, default in (("limit", 1000), ("offset", 0)):
        text = given.get(name, str(default)).strip()
        if not (text.isascii() and text.isdigit()) or len(text) > 18:
            raise falcon.HTTPBadRequest(
                title="Bad report page", description=f"The {name} is a whole number, not {text[:20]!r}."
            )
        numbers[name] = int(text)
    if not 1 <= numbers["limit"] <= MAX_PAGE_ROWS:
        raise falcon.HTTPBadRequest(
            title="Bad report page", description=f"The limit is 1 to {MAX_PAGE_ROWS:,} rows."
        )
    keys = [part.strip() for part in given.get("sort", "").split(",") if part.strip()]
    sort = tuple((key.removeprefix("-"), key.startswith("-")) for key in keys)
    return PageQuery(sort=sort, limit=numbers["limit"], offset=numbers["offset"])


def single_params(req: falcon.Request, repeatable: tuple[str, ...] = ()) -> dict[str, str]:
    """The query's parameters, each given once but for `repeatable` ones (left out: req.get_param_as_list)."""
    params = {}
    for name, value in req.params.items():
        if name in repeatable:
            continue
        if not isinstance(value, str):
            raise falcon.HTTPBadRequest(title="Repeated parameter", description=f"Give {name!r} once.")
        params[name] = value
    return params


def check_visible(req: falcon.Request, db, params: dict[str, str]) -> None:
    """400 unless a principal limited to some campaigns names only those (a report of all would count
    campaigns it may not see)."""
    visible = visible_campaigns(req)
    if visible is not None:
        refs = (params.get("campaign") or params.get("f.campaign") or "").split(",")
        ids = {get_campaign(db, ref.strip()).id for ref in refs if ref.strip()}
        if not ids or not ids <= visible:
            raise falcon.HTTPBadRequest(title="Name a campaign", description="Name one of your campaigns.")


@api_resource
class ReportSeriesResource:
    operations = {
        "GET": Operation(
            "Clicks, conversions, cost, revenue, profit and ROI by local day (by hour over two days or less) "
            "of each selected row of a report; filters as f.<name>=v1,v2.",
            params=(
                *REPORT_PARAMS,
                Param(
                    "row",
                    f"A row to chart (repeatable, up to {MAX_SERIES_ROWS}): its value, or for several "
                    'grouping levels a JSON array of its values in their order (["US", "1234"]).',
                ),
                Param("f.<name>", "A filter on a grouping name."),
            ),
            open_query=True,
        )
    }

    def __init__(self, auth, db, report_currency: str, history: HistoryFiles | None = None) -> None:
        self.auth, self.db, self.report_currency = auth, db, report_currency
        self.history = history

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        params = single_params(req, ("row",))
        check_report_parameters(params, (*NAMES, "row"))
        check_visible(req, self.db, params)
        query = report_query(params, self.report_currency)
        try:
            rows = parse_rows(req.get_param_as_list("row") or [], query.group_by)
        except ReportError as exc:
            raise falcon.HTTPBadRequest(title="Bad report query", description=str(exc)) from None
        series = run_report_query(
            self.db, query, self.history, run=lambda db, q, history: run_series(db, q, rows, history=history)
        )
        hides_money = req.context.principal.hides_money
        if wants_csv(req, params):
            columns = [c for c in series.columns if not (hides_money and c in MONEY_FIELDS)]
            notes = without_money_notes(series.notes) if hides_money else series.notes
            send_rows_csv(resp, series.flat_rows(), columns, series.currency, notes)
            return
        answer(req, resp, series.as_json())


def wants_csv(req: falcon.Request, params: dict[str, str]) -> bool:
    """format=csv, or no format and an Accept header preferring CSV to JSON."""
    if "format" in params:
        return params["format"] == "csv"
    accept = req.get_header("Accept") or ""
    return req.client_prefers(["application/json", "text/csv"]) == "text/csv" and "text/csv" in accept
