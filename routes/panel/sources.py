"""The traffic sources pages: the list, a new source (blank or from the bundled catalogue) and the
edit page, over the services `lanner source` and `/api/v1/sources` call (models/admin/sources.py)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import falcon

from models.accounts.access import creates_campaigns
from models.admin.services import AdminError
from models.admin.sources import (
    campaign_counts,
    catalogue,
    catalogue_entry,
    create_source,
    delete_source,
    get_source,
    list_sources,
    source_fields,
    update_source,
)
from models.choices import CONVERSION_STATUSES, POSTBACK_METHODS, SOURCE_STATUSES
from models.reporting.columnpages import SOURCES
from models.routing.sources import SourceError, parse_slots
from routes.panel.columnsets import ListSets
from routes.panel.common import (
    PERIODS,
    FormError,
    ListFilter,
    PanelContext,
    PanelReports,
    PanelResource,
    Period,
    chosen_period,
)
from routes.panel.listtable import (
    Column,
    ListTable,
    ListView,
    chooser_context,
    metric_columns,
    period_stats,
    send_csv,
    stats_of,
)
from routes.panel.session import read_form, read_form_lists

BLANK_FORM = {
    "name": "",
    "template": "",
    "slots": "",
    "postback_url": "",
    "postback_statuses": ["sale"],
    "postback_method": "GET",
    "status": "active",
}


def source_form(source, *, reveal: bool = True) -> dict:
    """A source's fields as its edit form shows them (slots: every name's, so none moves on save;
    `reveal`: the postback URL whole, else its host only)."""
    fields = source_fields(source, reveal=reveal)
    parameters = fields["parameters"]
    slots = [f"{p['name']}={p['field'][7:]}" for p in parameters if p["field"].startswith("sub_id_")]
    return {
        "name": source.name,
        "template": fields["template"],
        "slots": ", ".join(slots),
        "postback_url": fields["postback_url"],
        "postback_statuses": fields["postback_statuses"],
        "postback_method": source.postback_method,
        "status": source.status,
    }


def submitted(req) -> dict:
    form = read_form(req)
    values: dict[str, Any] = {
        name: str(form.get(name, "")).strip() for name in BLANK_FORM if name != "postback_statuses"
    }
    values["postback_statuses"] = read_form_lists(req).get("postback_statuses", [])
    values["csrf_token"] = str(form.get("csrf_token", ""))
    values["do"] = str(form.get("do", ""))
    return values


def source_changes(values: dict) -> dict:
    """The service's keyword arguments from a submitted form."""
    if not values["name"]:
        raise FormError("A traffic source needs a name.")
    try:
        slots = parse_slots(part for part in values["slots"].replace(",", " ").split() if part)
    except SourceError as exc:
        raise FormError(str(exc)) from None
    return {
        "name": values["name"],
        "template": values["template"],
        "slots": slots or None,
        "postback_url": values["postback_url"],
        "postback_statuses": values["postback_statuses"],
        "postback_method": values["postback_method"] or "GET",
    }


class SourcePages(PanelResource):
    @staticmethod
    def require_creator(principal) -> None:
        if not creates_campaigns(principal):
            raise falcon.HTTPForbidden(
                title="Read-only", description=f"{principal.name} may not create or change traffic sources."
            )

    def context(self, session) -> dict:
        return {
            "statuses": CONVERSION_STATUSES,
            "methods": POSTBACK_METHODS,
            "may_edit": creates_campaigns(session.principal),
        }


# The list's columns: the source, then the period's numbers of its campaigns the user sees.
SOURCE_TABLE = ListTable(
    (
        Column("name", "Source", lambda row: row["name"], "text"),
        Column("template", "Parameters", lambda row: row["template"], "text", is_csv_only=True),
        Column("status", "Status", lambda row: row["status"], "text"),
        Column("campaigns", "Campaigns", lambda row: row["campaigns"]),
        Column("postback", "Postback", lambda row: ",".join(row["postback_statuses"]), "text"),
        *metric_columns(("clicks", "conversions", "cr", "cost", "revenue", "profit", "roi", "cpc")),
    )
)


class SourceListResource(SourcePages):
    def __init__(self, sessions, render, reports: PanelReports) -> None:
        super().__init__(sessions, render)
        self.reports = reports

    def listing(self, req: falcon.Request, principal) -> tuple[ListView, str, Period]:
        """The list as the page shows it (and its CSV): the period, filters and sort of the query."""
        period = chosen_period(req)
        listing = ListFilter(req, SOURCE_STATUSES)
        report = self.reports(principal, "traffic_source", period)
        stats = period_stats(report, "traffic_source")
        counts = campaign_counts(self.sessions.db)
        rows = [
            {**source_fields(s, counts.get(s.id, 0)), "stats": stats_of(stats, s.id)}
            for s in list_sources(self.sessions.db, include_archived=True)
            if listing.keeps(s.status, s.name)
        ]
        state = {**period.query, "status": listing.status, "q": listing.search}
        currency = report.currency if report else self.reports.report_currency
        choice = self.sets.choice(req, principal)
        return SOURCE_TABLE.view(req, principal, rows, state, choice), currency, period

    @property
    def sets(self) -> ListSets:
        return ListSets(self.sessions.db, SOURCES)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        self.sets.redirect_for_controls(req, session.principal)
        form, message = dict(BLANK_FORM), ""
        key = req.get_param("catalogue")
        if key:  # "Start from": the entry fills the new-source form, to check and save.
            try:
                entry = catalogue_entry(key)
            except AdminError as exc:
                message = str(exc)
            else:
                form.update(name=entry["name"], template=entry["template"], postback_url=entry["postback"])
        deleted = req.get_param("deleted")
        done = f"Traffic source {deleted} deleted." if deleted else ""
        self.show(req, resp, session, form=form, message=message, chosen=key or "", done=done)

    def show(self, req, resp, session, *, code=200, form=None, message="", chosen="", done="") -> None:
        view, currency, period = self.listing(req, session.principal)
        entries = catalogue()["sources"]
        self.page(
            req,
            resp,
            "sources.html",
            session,
            code,
            view=view,
            rows=view.rows,
            currency=currency,
            **chooser_context(SOURCE_TABLE, self.sets, session.principal, view),
            period=period.key,
            range_period=period,
            range_state={**view.state, "sort": view.sort.text},
            periods=PERIODS,
            status=view.state["status"],
            list_statuses=("current", *SOURCE_STATUSES, "all"),
            search=view.state["q"],
            sort_text=view.sort.text,
            form=form or BLANK_FORM,
            message=message,
            done=done,
            catalogue=entries,
            about=catalogue()["about"],
            chosen=chosen,
            note=next((e["note"] for e in entries if e["key"] == chosen), ""),
            **self.context(session),
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        values = submitted(req)
        self.sessions.check_write(req, session, values)
        principal = session.principal
        self.require_creator(principal)
        try:
            changes = source_changes(values)
            source = create_source(
                self.sessions.db, changes.pop("name"), changes.pop("template"), actor=principal, **changes
            )
        except (FormError, AdminError) as exc:
            self.show(req, resp, session, code=400, form=values, message=str(exc))
            return
        raise falcon.HTTPSeeOther(f"/panel/sources/{source.id}?created=1")


class SourceCsvResource(SourceListResource):
    """`GET /panel/sources.csv`: the list as shown (period, search, status and sort)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        view, _, period = self.listing(req, session.principal)
        send_csv(resp, view, f"lanner-sources-{period.slug}.csv")


class SourceResource(SourcePages):
    def source(self, source_id: int):
        try:
            return get_source(self.sessions.db, source_id)
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None

    def on_get(self, req: falcon.Request, resp: falcon.Response, source_id: int) -> None:
        session = self.sessions.require(req)
        source = self.source(source_id)
        saved = "Created." if req.get_param("created") else "Saved." if req.get_param("saved") else ""
        form = source_form(source, reveal=creates_campaigns(session.principal))
        self.show(req, resp, session, source, form, saved=saved)

    def show(self, req, resp, session, source, form, *, code=200, message="", saved="") -> None:
        fields = source_fields(source, campaign_counts(self.sessions.db).get(source.id, 0))
        self.page(
            req,
            resp,
            "source.html",
            session,
            code,
            source=fields,
            form=form,
            message=message,
            saved=saved,
            source_statuses=SOURCE_STATUSES,
            **self.context(session),
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, source_id: int) -> None:
        session = self.sessions.require(req)
        values = submitted(req)
        self.sessions.check_write(req, session, values)
        principal = session.principal
        source = self.source(source_id)
        self.require_creator(principal)
        if values.get("do") == "delete":
            try:
                delete_source(self.sessions.db, source.id, actor=principal)
            except AdminError as exc:
                self.show(req, resp, session, source, source_form(source), code=409, message=str(exc))
                return
            raise falcon.HTTPSeeOther(f"/panel/sources?{urlencode({'deleted': source.name})}")
        try:
            changes = source_changes(values)
            if values["status"] not in SOURCE_STATUSES:
                raise FormError(f"The status is one of {', '.join(SOURCE_STATUSES)}.")
            update_source(self.sessions.db, source.id, status=values["status"], actor=principal, **changes)
        except (FormError, AdminError) as exc:
            self.show(req, resp, session, source, values, code=400, message=str(exc))
            return
        raise falcon.HTTPSeeOther(f"/panel/sources/{source.id}?saved=1")


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel/sources", SourceListResource(panel.sessions, panel.render, panel.reports))
    app.add_route("/panel/sources.csv", SourceCsvResource(panel.sessions, panel.render, panel.reports))
    app.add_route(
        "/panel/sources/{source_id:int(min=1, max=9223372036854775807)}",
        SourceResource(panel.sessions, panel.render),
    )
