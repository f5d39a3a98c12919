"""The panel's conversions: the conversion log, one conversion's correction (status, payout) and a
manual import from CSV, over the services routes/v1/conversions.py calls (models/conversions/manual.py).

An import is an admin's, as in the admin API: a row's campaign is known only once it is applied. The
CSV comes pasted in a textarea or as an uploaded file (multipart), at most MAX_UPLOAD_BYTES.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import falcon

from models.accounts.access import edits_campaign
from models.choices import CONVERSION_STATUSES
from models.clicks.record import MAX_ID
from models.conversions.manual import (
    IMPORT_COLUMNS,
    ConversionInputError,
    correct_conversion,
    get_conversion,
    import_conversions,
    verdict_counts,
)
from models.conversions.postbacks import ConversionRecorder
from models.errors import LannerError
from models.reporting.columnpages import CONVERSIONS
from models.reporting.conversionlog import CONVERSION_SORT, LogFilter, list_conversions, sorted_conversions
from models.reporting.historyclicks import click_history
from models.reporting.lognames import name_ids
from models.reporting.logorder import LogOrder
from models.reporting.timerange import local_iso, zone
from routes.panel.columnsets import ListSets
from routes.panel.common import PERIODS, PanelContext, PanelResource, timezone_of
from routes.panel.logs import (
    LOG_LABELS,
    Pager,
    campaign_choice,
    log_chooser,
    log_range,
    param,
    scope,
    visible_campaigns,
)
from routes.panel.logsort import SORTED_CHUNK_FACTOR, LogSort
from routes.panel.reports import csv_text
from routes.panel.session import read_form
from routes.v1.spec import refused

MAX_UPLOAD_BYTES = 2 << 20  # A CSV of MAX_IMPORT_ROWS lines with long subids and tids fits easily.
IMPORT_PATH = "/panel/conversions/import"


def require_visible_conversion(db, principal, conversion_id: int):
    """The conversion, or a 404 for one that does not exist or whose campaign the user may not see."""
    visible, _ = visible_campaigns(db, principal)
    try:
        conversion = get_conversion(conversion_id)
    except ConversionInputError as exc:
        raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None
    if visible is not None and conversion.campaign_id not in visible:
        raise falcon.HTTPNotFound(title="Not found", description=f"There is no conversion {conversion_id}.")
    return conversion


FILTERS = ("campaign", "subid", "status", "period", "from", "to")
CSV_CHUNK = (
    1000  # Rows read per query while a CSV streams: its memory is one chunk, whatever the log's length.
)


def log_filter(req: falcon.Request, visible: set[int] | None, principal, **paging: Any) -> LogFilter:
    """The conversion log's filters from the query (the page's and its CSV's: the same ones)."""
    return LogFilter(
        subid=param(req, "subid") or None,
        status=param(req, "status") or None,
        **paging,
        **scope(visible, campaign_choice(req, visible)),
        **log_range(req, timezone_of(principal), time.time()),
    )


class ConversionLogResource(PanelResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        principal = session.principal
        sets = ListSets(self.sessions.db, CONVERSIONS)
        sets.redirect_for_controls(req, principal)
        choice = sets.choice(req, principal)
        visible, campaigns = visible_campaigns(self.sessions.db, principal)
        sorting = LogSort(req, CONVERSION_SORT, ("time", *choice.columns), choice.sort)
        pager = Pager(req, is_sorted=sorting.is_sorted)
        query = log_filter(req, visible, principal, limit=pager.limit + 1, before_id=pager.before_id)
        try:
            if visible == set():
                rows = []
            elif sorting.is_sorted:
                page = sorted_conversions(
                    self.sessions.db, replace(query, limit=pager.limit), sorting.order()
                )
                rows = pager.sorted_rows(page.rows, sorting.cursor(page.after))
            else:
                rows = pager.rows(list_conversions(self.sessions.db, query))
        except LannerError as exc:
            raise refused(exc) from None
        name_ids(rows)
        form = {name: req.get_param(name) or "" for name in FILTERS}
        csv_form = {**form, "sort": sorting.text}
        self.page(
            req,
            resp,
            "conversions.html",
            session,
            rows=rows,
            pager=pager,
            **log_chooser(sets, principal, choice, LOG_LABELS, pager, sorting),
            campaigns=campaigns,
            periods=PERIODS,
            statuses=CONVERSION_STATUSES,
            is_importer=principal.role == "admin" and principal.can_write,
            form=form,
            csv_query=urllib.parse.urlencode({name: value for name, value in csv_form.items() if value}),
        )


def csv_header(hides_money: bool) -> list[str]:
    """The CSV's columns: the log's, each name and id apart, the status before its last change and its
    first status apart from it."""
    header = [
        "Time",
        "Subid",
        "Tid",
        "Status",
        "Before",
        "First",
        "Network's word",
        "Campaign",
        "Campaign id",
    ]
    header += ["Stream", "Stream id", "Offer", "Offer id", "Network"]
    return header if hides_money else [*header, "Payout", "Currency", "In report currency", "Cost"]


def csv_row(row: dict[str, Any], campaigns: dict[int, Any], hides_money: bool) -> list[str]:
    """A conversion as the log shows it (names as text a spreadsheet will not run, amounts as numbers)."""
    campaign = campaigns.get(row["campaign_id"])
    cells = [
        row["created_at"][:19].replace("T", " "),
        csv_text(row["subid"]),
        csv_text(row["tid"] or ""),
        row["status"],
        row["previous_status"],
        row["original_status"],
        csv_text(row["raw_status"] or ""),
        csv_text(campaign.name if campaign else str(row["campaign_id"])),
        str(row["campaign_id"]),
        csv_text(row["stream_name"]),
        "" if row["stream_id"] is None else str(row["stream_id"]),
        csv_text(row["offer_name"]),
        "" if row["offer_id"] is None else str(row["offer_id"]),
        csv_text(row["network"] or ""),
    ]
    if hides_money:
        return cells
    amounts = (row["payout"], row["report_payout"], row["cost"])
    payout, report_payout, cost = ("" if a is None else f"{a:.2f}" for a in amounts)
    return [*cells, payout, row["currency"] or "", report_payout, cost]


class ConversionCsvResource(PanelResource):
    """`GET /panel/conversions.csv`: every conversion the log's filters select (all its pages), the
    columns it shows. Streamed: read `chunk` rows (CSV_CHUNK) at a time by the log's own cursor, so a
    million rows never sit in memory at once."""

    def __init__(self, sessions, render, chunk: int = CSV_CHUNK) -> None:
        super().__init__(sessions, render)
        self.chunk = chunk

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        principal = session.principal
        db = self.sessions.db
        visible, campaigns = visible_campaigns(db, principal)
        # The CSV carries every column the user may see: it sorts by any of them.
        shown = [key for key in CONVERSION_SORT if not (principal.hides_money and key in CONVERSIONS.money)]
        sorting = LogSort(req, CONVERSION_SORT, shown)
        query = log_filter(req, visible, principal, limit=self.chunk)
        try:  # The first chunk before the answer starts: a bad filter is a 400, not a cut CSV.
            if visible == set():
                chunks: Iterator[list[dict]] = iter([[]])
            elif sorting.is_sorted:
                sorted_query = replace(query, limit=self.chunk * SORTED_CHUNK_FACTOR)
                chunks = self.sorted_chunks(db, sorted_query, sorting.order())
            else:
                chunks = self.chunks(db, query)
            first = next(chunks)
        except LannerError as exc:
            raise refused(exc) from None
        resp.content_type = "text/csv; charset=utf-8"
        resp.set_header("Cache-Control", "no-store")
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.set_header("Content-Disposition", 'attachment; filename="lanner-conversions.csv"')
        resp.stream = self.lines(itertools.chain([first], chunks), campaigns, principal.hides_money)

    @staticmethod
    def chunks(db, query: LogFilter) -> Iterator[list[dict]]:
        """The log's conversions newest first, a chunk at a time by its own cursor."""
        while True:
            rows = list_conversions(db, query)
            yield rows
            if len(rows) < query.limit:
                return
            query = replace(query, before_id=rows[-1]["id"])

    @staticmethod
    def sorted_chunks(db, query: LogFilter, order: LogOrder) -> Iterator[list[dict]]:
        """The log's conversions in the sort's order, a chunk at a time by its keyset cursor."""
        while True:
            page = sorted_conversions(db, query, order)
            yield page.rows
            if page.after is None:
                return
            order = order.with_after(page.after)

    @staticmethod
    def lines(chunks: Iterator[list[dict]], campaigns, hides_money: bool) -> Iterator[bytes]:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(csv_header(hides_money))
        for rows in chunks:
            for row in name_ids(rows):
                writer.writerow(csv_row(row, campaigns, hides_money))
            yield out.getvalue().encode()
            out.seek(0)
            out.truncate()


class ConversionResource(PanelResource):
    """One conversion and its correction form: a new status and, for a user who sees money, a new payout."""

    def show(self, req, resp, session, conversion, code=200, message="", form=None) -> None:
        principal = session.principal
        tz = zone(timezone_of(principal))
        _, campaigns = visible_campaigns(self.sessions.db, principal)
        self.page(
            req,
            resp,
            "conversion.html",
            session,
            code,
            conversion=conversion,
            names=name_ids([{"stream_id": conversion.stream_id, "offer_id": conversion.offer_id}])[0],
            created_at=local_iso(conversion.created_at, tz),
            campaign=campaigns.get(conversion.campaign_id),
            statuses=CONVERSION_STATUSES,
            is_editable=principal.can_write
            and edits_campaign(self.sessions.db, principal, conversion.campaign_id),
            message=message,
            form={"status": conversion.status, "payout": repr(conversion.payout), **(form or {})},
            saved=param(req, "saved") == "1",
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response, conversion_id: int) -> None:
        session = self.sessions.require(req)
        conversion = require_visible_conversion(self.sessions.db, session.principal, conversion_id)
        self.show(req, resp, session, conversion)

    def on_post(self, req: falcon.Request, resp: falcon.Response, conversion_id: int) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        principal = session.principal
        db = self.sessions.db
        conversion = require_visible_conversion(db, principal, conversion_id)
        if not principal.can_write or not edits_campaign(db, principal, conversion.campaign_id):
            raise falcon.HTTPForbidden(
                title="Read-only", description=f"{principal.name} may not change this conversion."
            )
        status = str(form.get("status") or "").strip() or None
        payout_text = str(form.get("payout") or "").strip()
        if payout_text and principal.hides_money:
            raise falcon.HTTPForbidden(title="Money hidden", description="This user does not set payouts.")
        try:
            payout = float(payout_text) if payout_text else None
            if payout is not None and not math.isfinite(payout):
                raise ValueError
        except ValueError:
            self.show(req, resp, session, conversion, 400, f"{payout_text[:40]!r} is not a number.", form)
            return
        if payout is not None and payout == conversion.payout:
            payout = None  # The form sends the payout it showed: only a change is one.
        if status == conversion.status and payout is None:
            status = None
        if status is None and payout is None:
            self.show(req, resp, session, conversion, 400, "Change the status or the payout first.", form)
            return
        try:
            correct_conversion(db, conversion_id, status=status, payout=payout, actor=principal)
        except LannerError as exc:
            self.show(req, resp, session, conversion, 400, str(exc), form)
            return
        resp.status = falcon.HTTP_303
        resp.location = f"/panel/conversions/{conversion_id}?saved=1"


def read_import(req: falcon.Request) -> dict[str, str]:
    """The import form's fields (csrf_token, csv, file) as text, from a multipart or urlencoded body of
    at most MAX_UPLOAD_BYTES (413 past it, before any of it is read)."""
    if req.content_length is None:
        raise falcon.HTTPLengthRequired(title="Length required", description="Send the form with its length.")
    if req.content_length > MAX_UPLOAD_BYTES:
        raise falcon.HTTPContentTooLarge(
            title="File too large",
            description=f"An import takes at most {MAX_UPLOAD_BYTES >> 20} MB; split the file.",
        )
    if (req.content_type or "").split(";")[0].strip().lower() != falcon.MEDIA_MULTIPART:
        return {name: str(value) for name, value in read_form(req).items()}
    fields: dict[str, str] = {}
    try:
        for part in req.get_media():
            if part.name in ("csrf_token", "csv", "file") and part.name not in fields:
                # The body is bounded above, so reading a part whole is too (part.data stops at 1 MiB).
                fields[part.name] = part.stream.read().decode("utf-8-sig")
            else:
                part.stream.read()
    except UnicodeDecodeError:
        raise falcon.HTTPBadRequest(title="Bad CSV", description="The CSV is not UTF-8 text.") from None
    return fields


class ConversionImportResource(PanelResource):
    def __init__(self, sessions, render, recorder: ConversionRecorder) -> None:
        super().__init__(sessions, render)
        self.recorder = recorder

    def require_importer(self, principal) -> None:
        if principal.role != "admin" or not principal.can_write:
            raise falcon.HTTPForbidden(
                title="Admins only", description="Importing conversions is for admins."
            )

    def show(self, req, resp, session, code=200, text="", message="", rows=None) -> None:
        self.page(
            req,
            resp,
            "conversions_import.html",
            session,
            code,
            columns=IMPORT_COLUMNS,
            text=text,
            message=message,
            rows=rows,
            verdicts=verdict_counts(rows) if rows else {},
            max_mb=MAX_UPLOAD_BYTES >> 20,
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        self.require_importer(session.principal)
        self.show(req, resp, session)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        fields = read_import(req)
        self.sessions.check_write(req, session, fields)
        self.require_importer(session.principal)
        # A chosen file wins over the textarea (a form without a file sends an empty part).
        text = fields.get("file", "") if fields.get("file", "").strip() else fields.get("csv", "")
        if not text.strip():
            self.show(req, resp, session, 400, text, "Paste the CSV or choose a file.")
            return
        try:
            rows = import_conversions(
                self.recorder, text, remote_ip=self.sessions.client_ip(req), actor=session.principal
            )
        except LannerError as exc:
            self.show(req, resp, session, 400, text, str(exc))
            return
        # The verdicts are the answer, shown at once rather than after a redirect: sent again (a reload),
        # the same rows are answered `duplicate` and change nothing.
        self.show(req, resp, session, 200, "", "", rows)


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    sessions, render = panel.sessions, panel.render
    recorder = ConversionRecorder(
        panel.db, park_ms=panel.settings.postback_park_ms, history=click_history(panel.settings)
    )
    app.add_route("/panel/conversions", ConversionLogResource(sessions, render))
    app.add_route(
        "/panel/conversions.csv",
        ConversionCsvResource(sessions, render, panel.conversion_csv_chunk or CSV_CHUNK),
    )
    app.add_route(IMPORT_PATH, ConversionImportResource(sessions, render, recorder))
    app.add_route(
        f"/panel/conversions/{{conversion_id:int(min=1, max={MAX_ID})}}", ConversionResource(sessions, render)
    )
