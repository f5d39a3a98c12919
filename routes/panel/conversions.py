"""The panel's conversions: the conversion log, one conversion's correction (status, payout) and a
manual import from CSV, over the services routes/v1/conversions.py calls (models/conversions/manual.py).

An import is an admin's, as in the admin API: a row's campaign is known only once it is applied. The
CSV comes pasted in a textarea or as an uploaded file (multipart), at most MAX_UPLOAD_BYTES.
"""

from __future__ import annotations

import math
import time

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
from models.reporting.conversionlog import LogFilter, list_conversions
from models.reporting.historyclicks import click_history
from models.reporting.timerange import local_iso, zone
from routes.panel.common import PERIODS, PanelContext, PanelResource, timezone_of
from routes.panel.logs import Pager, campaign_choice, log_range, param, scope, visible_campaigns
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


class ConversionLogResource(PanelResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        principal = session.principal
        visible, campaigns = visible_campaigns(self.sessions.db, principal)
        chosen = campaign_choice(req, visible)
        pager = Pager(req)
        query = LogFilter(
            subid=param(req, "subid") or None,
            status=param(req, "status") or None,
            limit=pager.limit + 1,
            before_id=pager.before_id,
            **scope(visible, chosen),
            **log_range(req, timezone_of(principal), time.time()),
        )
        try:
            rows = [] if visible == set() else pager.rows(list_conversions(self.sessions.db, query))
        except LannerError as exc:
            raise refused(exc) from None
        self.page(
            req,
            resp,
            "conversions.html",
            session,
            rows=rows,
            pager=pager,
            campaigns=campaigns,
            periods=PERIODS,
            statuses=CONVERSION_STATUSES,
            is_importer=principal.role == "admin" and principal.can_write,
            form={
                name: req.get_param(name) or ""
                for name in ("campaign", "subid", "status", "period", "from", "to")
            },
        )


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
    app.add_route(IMPORT_PATH, ConversionImportResource(sessions, render, recorder))
    app.add_route(
        f"/panel/conversions/{{conversion_id:int(min=1, max={MAX_ID})}}", ConversionResource(sessions, render)
    )
