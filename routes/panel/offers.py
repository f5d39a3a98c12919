"""The offers pages: the list with the period's numbers, search, create and edit, over the services
`lanner offer create|update` and `/api/v1/offers` call (models/admin/services.py)."""

from __future__ import annotations

import math

import falcon

from models.accounts.access import creates_campaigns, visible_offer, visible_offer_ids
from models.admin.services import AdminError, create_offer, list_offers, rate_warnings, update_offer
from models.choices import OFFER_STATUSES
from models.conversions.networks import list_networks
from models.reporting.columnpages import OFFERS
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
from routes.panel.listtable import Column, ListTable, ListView, chooser_context, send_csv
from routes.panel.render import Renderer
from routes.panel.session import PanelSessions, read_form

BLANK_FORM = {
    "name": "",
    "url": "",
    "payout": "0",
    "currency": "",
    "daily_cap": "",
    "total_cap": "",
    "timezone": "UTC",
    "status": "active",
    "network": "",
}


def offer_form(offer) -> dict[str, str]:
    """An offer's fields as its edit form shows them."""
    return {
        "name": offer.name,
        "url": offer.url,
        "payout": f"{offer.payout:g}",
        "currency": offer.currency,
        "daily_cap": "" if offer.daily_cap is None else str(offer.daily_cap),
        "total_cap": "" if offer.total_cap is None else str(offer.total_cap),
        "timezone": offer.timezone,
        "status": offer.status,
        "network": "" if offer.network_id is None else str(offer.network_id),
    }


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise FormError(f"{what} must be a number.") from None
    if not math.isfinite(value):
        raise FormError(f"{what} must be a number.")
    return value


def _cap(text: str, what: str) -> int | None:
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) >= 2**63:
        raise FormError(f"{what} must be a whole number of clicks, or empty for none.")
    return int(text)


def _network(text: str) -> int | None:
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) >= 2**63:
        raise FormError("Choose the network from the list.")
    return int(text)


def offer_fields(form: dict[str, str], *, shows_money: bool) -> dict:
    """The service's keyword arguments from a submitted form (its values already stripped)."""
    if not form["name"]:
        raise FormError("An offer needs a name.")
    fields: dict[str, object] = {
        "name": form["name"],
        "url": form["url"],
        "currency": form["currency"].upper() or None,
        "daily_cap": _cap(form["daily_cap"], "The daily cap"),
        "total_cap": _cap(form["total_cap"], "The total cap"),
        "timezone": form["timezone"] or "UTC",
        "network_id": _network(form["network"]),
    }
    if shows_money:  # A user who hides money is shown no payout, so sends none: it stays as it is.
        fields["payout"] = _number(form["payout"] or "0", "The payout")
    return fields


def submitted(req_form: dict) -> dict[str, str]:
    return {name: str(req_form.get(name, "")).strip() for name in BLANK_FORM}


class OfferPages(PanelResource):
    """What the list and the edit page share: which offers the principal may see and change."""

    def __init__(self, sessions: PanelSessions, render: Renderer, reports: PanelReports) -> None:
        super().__init__(sessions, render)
        self.reports = reports

    def visible_offer(self, principal, offer_id: int):
        try:
            return visible_offer(self.sessions.db, principal, offer_id)
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None

    @staticmethod
    def require_creator(principal) -> None:
        if not creates_campaigns(principal):
            raise falcon.HTTPForbidden(
                title="Read-only", description=f"{principal.name} may not create or change offers."
            )


# The list's columns; the payout is in the offer's own currency, the period's amounts in the report's.
OFFER_TABLE = ListTable(
    (
        Column("name", "Offer", lambda row: row["offer"].name, "text"),
        Column("url", "URL", lambda row: row["offer"].url, "text", is_csv_only=True),
        Column("status", "Status", lambda row: row["offer"].status, "text"),
        Column("network", "Network", lambda row: row["network"], "text"),
        Column("payout", "Payout", lambda row: row["offer"].payout, "money"),
        Column(
            "currency",
            "Payout currency",
            lambda row: row["offer"].currency,
            "text",
            is_csv_only=True,
            is_about_money=True,
        ),
        Column("daily_cap", "Daily cap", lambda row: row["offer"].daily_cap),
        Column("total_cap", "Total cap", lambda row: row["offer"].total_cap),
        Column("clicks", "Clicks", lambda row: row["clicks"]),
        Column("conversions", "Conv.", lambda row: row["conversions"]),
        Column("cr", "CR", lambda row: row["cr"], "percent"),
        Column("revenue", "Revenue", lambda row: row["revenue"], "money"),
        Column("epc", "EPC", lambda row: row["epc"], "money"),
    )
)


class OfferListResource(OfferPages):
    @property
    def sets(self) -> ListSets:
        return ListSets(self.sessions.db, OFFERS)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        self.sets.redirect_for_controls(req, session.principal)
        self.show(req, resp, session)

    def listing(self, req: falcon.Request, principal) -> tuple[ListView, str, Period]:
        """The list as the page shows it (and its CSV): the period, filters and sort of the query; and
        the report currency of its amounts."""
        period = chosen_period(req)
        listing = ListFilter(req, OFFER_STATUSES)
        visible = visible_offer_ids(self.sessions.db, principal)
        report = self.reports(principal, "offer", period)
        stats = {row["offer"]: row for row in report.rows} if report else {}
        network_names = {n.id: n.name for n in list_networks(self.sessions.db)}
        rows = []
        for offer in list_offers(self.sessions.db):
            if visible is not None and offer.id not in visible:
                continue
            network = network_names.get(offer.network_id, "") if offer.network_id else ""
            if not listing.keeps(offer.status, offer.name, offer.url, network):
                continue
            row = stats.get(offer.id, {})
            clicks, conversions, revenue = (
                row.get("clicks", 0),
                row.get("conversions", 0),
                row.get("revenue", 0),
            )
            rows.append(
                {
                    "offer": offer,
                    "network": network,
                    "clicks": clicks,
                    "conversions": conversions,
                    "revenue": revenue,
                    "cr": conversions / clicks * 100 if clicks else None,
                    "epc": revenue / clicks if clicks else None,
                }
            )
        state = {**period.query, "status": listing.status, "q": listing.search}
        currency = report.currency if report else self.reports.report_currency
        choice = self.sets.choice(req, principal)
        return OFFER_TABLE.view(req, principal, rows, state, choice), currency, period

    def show(self, req, resp, session, *, code=200, form=None, message="") -> None:
        principal = session.principal
        view, currency, period = self.listing(req, principal)
        self.page(
            req,
            resp,
            "offers.html",
            session,
            code,
            period=period.key,
            range_period=period,
            range_state={**view.state, "sort": view.sort.text},
            periods=PERIODS,
            status=view.state["status"],
            statuses=("current", *OFFER_STATUSES, "all"),
            search=view.state["q"],
            sort_text=view.sort.text,
            view=view,
            rows=view.rows,
            currency=currency,
            **chooser_context(OFFER_TABLE, self.sets, principal, view),
            may_create=creates_campaigns(principal),
            form=form or BLANK_FORM,
            message=message,
            networks=list_networks(self.sessions.db),
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        principal = session.principal
        self.require_creator(principal)
        values = submitted(form)
        try:
            fields = offer_fields(values, shows_money=not principal.hides_money)
            offer = create_offer(
                self.sessions.db, fields.pop("name"), fields.pop("url"), actor=principal, **fields
            )
        except (FormError, AdminError) as exc:
            self.show(req, resp, session, code=400, form=values, message=str(exc))
            return
        resp.status = falcon.HTTP_303
        resp.location = f"/panel/offers/{offer.id}?created=1"


class OfferCsvResource(OfferListResource):
    """`GET /panel/offers.csv`: the list as shown (period, search, status and sort), with each offer's URL
    and payout currency."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        view, _, period = self.listing(req, session.principal)
        send_csv(resp, view, f"lanner-offers-{period.slug}.csv")


class OfferResource(OfferPages):
    def on_get(self, req: falcon.Request, resp: falcon.Response, offer_id: int) -> None:
        session = self.sessions.require(req)
        offer = self.visible_offer(session.principal, offer_id)
        saved = "Created." if req.get_param("created") else "Saved." if req.get_param("saved") else ""
        self.show(req, resp, session, offer, offer_form(offer), saved=saved)

    def show(self, req, resp, session, offer, form, *, code=200, message="", saved="") -> None:
        self.page(
            req,
            resp,
            "offer.html",
            session,
            code,
            offer=offer,
            form=form,
            message=message,
            saved=saved,
            # Accepted without a rate, but told (as the CLI and the API tell), until one is stored.
            warnings=rate_warnings(self.sessions.db, offer.currency),
            statuses=OFFER_STATUSES,
            may_edit=creates_campaigns(session.principal),
            networks=list_networks(self.sessions.db),
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, offer_id: int) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        principal = session.principal
        offer = self.visible_offer(principal, offer_id)
        self.require_creator(principal)
        values = submitted(form)
        try:
            fields = offer_fields(values, shows_money=not principal.hides_money)
            values["status"] = values["status"] or offer.status
            if values["status"] not in OFFER_STATUSES:
                raise FormError(f"The status is one of {', '.join(OFFER_STATUSES)}.")
            caps = {"daily_cap": fields.pop("daily_cap"), "total_cap": fields.pop("total_cap")}
            update_offer(
                self.sessions.db,
                offer.id,
                status=values["status"],
                actor=principal,
                clear_caps=None in caps.values(),
                clear_network=fields["network_id"] is None,
                **fields,
                **caps,
            )
        except (FormError, AdminError) as exc:
            self.show(req, resp, session, offer, values, code=400, message=str(exc))
            return
        resp.status = falcon.HTTP_303
        resp.location = f"/panel/offers/{offer.id}?saved=1"


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel/offers", OfferListResource(panel.sessions, panel.render, panel.reports))
    app.add_route("/panel/offers.csv", OfferCsvResource(panel.sessions, panel.render, panel.reports))
    app.add_route(
        "/panel/offers/{offer_id:int(min=1, max=9223372036854775807)}",
        OfferResource(panel.sessions, panel.render, panel.reports),
    )
