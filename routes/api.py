"""`GET /api/report`: the report as JSON or CSV, for dashboards and scripts; API-key protected.

Parameters: `group=campaign,country` (nested levels), `preset=` or `from=`/`to=` (local dates or
date-times), `timezone=`, `campaign=` (ids or aliases), filters as `f.<name>=v1,v2` (e.g.
`f.country=US,GB`), `format=json|csv`. Any other parameter is refused: a misspelt one silently
ignored answered a report for everything. The key comes in the `X-Api-Key` header (or `api_key=`),
compared in constant time.
JSON names the report currency (`"currency": "USD"`) and lists conversions left out of revenue for
want of an exchange rate (`"unconverted"`, with `"notes"`); CSV sends the currency in
`X-Lanner-Currency` and the notes in `X-Lanner-Notes`.

`GET /api/currency/rates` lists the exchange rates; `POST` (or `PUT`) `{"rates": {"EUR": 1.08}}`
sets them (one unit in the report currency), same key.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator

import falcon

from models.conversions.postbacks import keys_match, read_secret
from models.reporting.currency import CurrencyError, list_rates, report_currency, set_rates
from models.reporting.history import HistoryFiles
from models.reporting.notes import without_money_notes
from models.reporting.reports import (
    PrunedRangeError,
    Report,
    ReportError,
    ReportQuery,
    parse_filters,
    run_report,
)
from models.reporting.reportstream import ReportStream, stream_report
from models.reporting.timerange import TimeRangeError
from routes.inputs import Unreadable, load_json

PARAMETERS = ("group", "preset", "from", "to", "timezone", "campaign", "format", "api_key")
FORMATS = ("json", "csv")
RATES_FORM = 'JSON of the form {"rates": {"EUR": 1.08}}'
MAX_RATES_BYTES = 65536  # A `POST /api/currency/rates` body: read up to this, the rest ignored.


def check_report_parameters(params: dict[str, str], names: tuple[str, ...] = PARAMETERS) -> None:
    unknown = [name for name in params if name not in names and not name.startswith("f.")]
    if unknown:
        raise falcon.HTTPBadRequest(
            title="Unknown report parameter",
            description=f"Unknown parameter {unknown[0]!r}; use {', '.join(names)} or f.<name> filters.",
        )
    if params.get("format", "json") not in FORMATS:
        raise falcon.HTTPBadRequest(title="Bad report query", description="The format is json or csv.")
    if "campaign" in params and "f.campaign" in params:
        raise falcon.HTTPBadRequest(
            title="Bad report query", description="Give campaign= or f.campaign=, not both."
        )


def report_from_parameters(
    db, params: dict[str, str], report_currency: str = "", history: HistoryFiles | None = None
) -> Report:
    """The report `params` ask for (checked by check_report_parameters), or the HTTP error saying why not."""
    return run_report_query(db, report_query(params, report_currency), history)


def report_query(params: dict[str, str], report_currency: str = "") -> ReportQuery:
    """The query `params` say, in the report language; 400 with the report's sentence when malformed."""
    params = dict(params)
    if "campaign" in params:
        params["f.campaign"] = params.pop("campaign")
    try:
        filters = parse_filters(
            tuple(f"{name[2:]}={value}" for name, value in params.items() if name.startswith("f."))
        )
    except ReportError as exc:
        raise falcon.HTTPBadRequest(title="Bad report query", description=str(exc)) from None
    return ReportQuery(
        group_by=tuple(g.strip() for g in params.get("group", "campaign").split(",") if g.strip()),
        filters=filters,
        preset=params.get("preset") or (None if ("from" in params or "to" in params) else "last_30_days"),
        since=params.get("from"),
        until=params.get("to"),
        timezone=params.get("timezone", "UTC"),
        currency=report_currency,
    )


def run_report_query(db, query: ReportQuery, history: HistoryFiles | None = None, run: Callable = run_report):
    """The report (from the columnar history where it answers), or 422 (clicks pruned) / 400 (a bad
    query) with the report's sentence. `run`: what makes it (run_report; run_series with its rows)."""
    try:
        return run(db, query, history=history)
    except PrunedRangeError as exc:  # A fine query over data that is gone: not a bad request.
        raise falcon.HTTPUnprocessableEntity(title="Clicks pruned", description=str(exc)) from None
    except (ReportError, TimeRangeError) as exc:
        raise falcon.HTTPBadRequest(title="Bad report query", description=str(exc)) from None


CSV_CHUNK_ROWS = 1000  # Rows a streamed CSV writes per chunk it hands the server.


def csv_chunks(rows: Iterable[dict], columns: list[str]) -> Iterator[bytes]:
    """`rows` as CSV (a header of `columns` first), a chunk of CSV_CHUNK_ROWS rows at a time."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for count, row in enumerate(rows, 1):
        writer.writerow(row)
        if count % CSV_CHUNK_ROWS == 0:
            yield out.getvalue().encode()
            out.seek(0)
            out.truncate()
    yield out.getvalue().encode()


def send_report_csv(
    resp: falcon.Response, report: Report | ReportStream, columns: list[str], hides_money: bool = False
) -> None:
    """The report's rows as CSV, streamed as they are read (a ReportStream's never all in memory); the
    currency in X-Lanner-Currency, the notes in X-Lanner-Notes (none naming money where it is hidden)."""
    resp.content_type = "text/csv"
    resp.set_header("X-Lanner-Currency", report.currency)
    notes = without_money_notes(report.notes) if hides_money else report.notes
    if notes:
        resp.set_header("X-Lanner-Notes", json.dumps(notes))
    resp.stream = csv_chunks(report.rows, columns)


def send_rows_csv(
    resp: falcon.Response, rows: list[dict], columns: list[str], currency: str, notes: list[str]
) -> None:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    resp.content_type = "text/csv"
    resp.set_header("X-Lanner-Currency", currency)
    if notes:
        resp.set_header("X-Lanner-Notes", json.dumps(notes))
    resp.text = out.getvalue()


class ReportApiResource:
    def __init__(self, db, report_currency: str = "", history: HistoryFiles | None = None) -> None:
        self.db = db
        self.report_currency = report_currency  # The settings'; a report refuses other stored amounts.
        self.history = history  # The columnar history's files (None: the rollups and row store only).

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("Cache-Control", "no-store")
        given = req.get_header("X-Api-Key") or req.get_param("api_key") or ""
        if not keys_match(given, read_secret(self.db, "api_key")):
            raise falcon.HTTPForbidden(title="Wrong API key", description="Send the key in X-Api-Key.")
        params = {name: value if isinstance(value, str) else value[0] for name, value in req.params.items()}
        check_report_parameters(params)
        if params.get("format") == "csv":
            query = report_query(params, self.report_currency)
            stream = run_report_query(self.db, query, self.history, run=stream_report)
            send_report_csv(resp, stream, stream.columns)
            return
        report = report_from_parameters(self.db, params, self.report_currency, self.history)
        resp.content_type = falcon.MEDIA_JSON
        # allow_nan=False: the report has no Infinity or NaN (models/reporting/reports.py), and none may leak
        # out as the invalid JSON tokens Python would print for them.
        resp.text = json.dumps(report.as_json(), allow_nan=False)


class ExchangeRateApiResource:
    """`/api/currency/rates`: list (GET) and set (POST/PUT) exchange rates; API-key protected."""

    def __init__(self, db) -> None:
        self.db = db

    def _check_key(self, req: falcon.Request) -> None:
        given = req.get_header("X-Api-Key") or req.get_param("api_key") or ""
        if not keys_match(given, read_secret(self.db, "api_key")):
            raise falcon.HTTPForbidden(title="Wrong API key", description="Send the key in X-Api-Key.")

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("Cache-Control", "no-store")
        self._check_key(req)
        resp.media = {"currency": report_currency(self.db.connection()), "rates": list_rates(self.db)}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header("Cache-Control", "no-store")
        self._check_key(req)
        try:
            body = load_json(req.bounded_stream.read(MAX_RATES_BYTES) or b"null")
        except Unreadable as exc:  # What was wrong, then what to send.
            raise falcon.HTTPBadRequest(
                title="Bad rates", description=f"{str(exc).rstrip('.')}; send {RATES_FORM}."
            ) from None
        rates = body.get("rates") if isinstance(body, dict) else None
        if not isinstance(rates, dict) or not rates:
            raise falcon.HTTPBadRequest(title="Bad rates", description=f"Send {RATES_FORM}.")
        try:
            changes = set_rates(self.db, rates, source="api")
        except CurrencyError as exc:
            raise falcon.HTTPBadRequest(title="Bad rates", description=str(exc)) from None
        resp.media = {
            "currency": report_currency(self.db.connection()),
            "set": [{"currency": c.currency, "rate": c.rate, "converted": c.converted} for c in changes],
        }

    on_put = on_post
