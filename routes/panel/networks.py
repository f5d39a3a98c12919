"""Affiliate networks (/panel/networks): the list, a new network from the bundled catalogue or from the
network's own macros, and a network's page: the postback URL built for it, ready to paste into the
network, its settings, its status maps and its offers. Over models/conversions/networks.py, as `lanner
network` and `/api/v1/networks` are.

Everyone sees networks (offers name them), with the offers they see (models/accounts/access.py); only an
admin changes one and sees the install's postback key in its URL, as on the postbacks page
(routes/panel/postbacks.py): a network's status maps are install-wide, as all status maps are.
"""

from __future__ import annotations

from urllib.parse import urlencode

import falcon

from models.accounts.access import visible_offer_ids, visible_offers
from models.admin.services import AdminError
from models.choices import NETWORK_REBILLS, NETWORK_STATUS_CHANGES, NETWORK_STATUSES
from models.conversions import admin, networks
from models.conversions.postbacks import STATUSES, read_secret
from models.reporting.columnpages import NETWORKS
from routes.panel.columnsets import ListSets
from routes.panel.common import (
    PERIODS,
    CampaignBase,
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
from routes.panel.postbacks import KEY_PLACEHOLDER
from routes.panel.render import Renderer
from routes.panel.session import PanelSessions, read_form

PATH = "/panel/networks"
RULES = ("status_changes", "rebills")  # Blank in a form: the default's (a new network), as it was (a save).
FIELDS = ("name", *networks.MACRO_FIELDS, "offer_params", "notes", *RULES)
BLANK_FORM = dict.fromkeys((*FIELDS, "alias", "template"), "")
RULE_CHOICES = {"status_changes": NETWORK_STATUS_CHANGES, "rebills": NETWORK_REBILLS}
DONE = {
    "created": "Network created: paste its postback URL into the network.",
    "saved": "Saved.",
    "mapped": "Status map saved; stored conversions with that word took it.",
    "unmapped": "Status map removed.",
}


AFTER = {"save": "saved", "map": "mapped", "unmap": "unmapped"}
DELETED = "Network {} deleted; its status maps stay, as the maps of its alias."


def submitted(form: dict, names) -> dict[str, str]:
    return {name: str(form.get(name, "")).strip() for name in names}


def network_form(network) -> dict[str, str]:
    return {name: getattr(network, name) for name in (*FIELDS, "status")}


def require_admin(principal) -> None:
    if principal.role != "admin":
        raise falcon.HTTPForbidden(title="Not allowed", description="Only an admin may change networks.")


# The list's columns: the network, the period's numbers of its offers the user sees, its macros.
NETWORK_TABLE = ListTable(
    (
        Column("name", "Network", lambda row: row["network"].name, "text"),
        Column("alias", "Alias", lambda row: row["network"].alias, "text"),
        Column("status", "Status", lambda row: row["network"].status, "text"),
        Column("offers", "Offers", lambda row: row["offers"]),
        *metric_columns(("clicks", "conversions", "cr", "revenue", "epc")),
        Column("subid_macro", "Subid", lambda row: row["network"].subid_macro, "text"),
        Column("payout_macro", "Payout macro", lambda row: row["network"].payout_macro, "text"),
        Column("status_macro", "Status word", lambda row: row["network"].status_macro, "text"),
        Column("tid_macro", "Transaction id", lambda row: row["network"].tid_macro, "text"),
    )
)


class NetworkListResource(PanelResource):
    """The list and the new-network form, which posts `do=preview` (what would be made, nothing saved)
    or creates the network."""

    def __init__(self, sessions: PanelSessions, render: Renderer, reports: PanelReports, settings) -> None:
        super().__init__(sessions, render)
        self.reports = reports
        self.tracker_base = CampaignBase(sessions, settings)

    @property
    def sets(self) -> ListSets:
        return ListSets(self.sessions.db, NETWORKS)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        deleted = req.get_param("deleted")
        session = self.sessions.require(req)
        self.sets.redirect_for_controls(req, session.principal)
        self.show(req, resp, session, done=DELETED.format(deleted) if deleted else "")

    def listing(self, req: falcon.Request, principal) -> tuple[ListView, str, Period]:
        """The list as the page shows it (and its CSV): the period, filters and sort of the query."""
        db = self.sessions.db
        period = chosen_period(req)
        listing = ListFilter(req, NETWORK_STATUSES)
        counts = networks.offer_counts(db, visible_offer_ids(db, principal))
        report = self.reports(principal, "network", period)
        stats = period_stats(report, "network")
        rows = [
            {"network": n, "offers": counts.get(n.id, 0), "stats": stats_of(stats, n.id)}
            for n in networks.list_networks(db)
            if listing.keeps(n.status, n.name, n.alias)
        ]
        state = {**period.query, "status": listing.status, "q": listing.search}
        currency = report.currency if report else self.reports.report_currency
        choice = self.sets.choice(req, principal)
        return NETWORK_TABLE.view(req, principal, rows, state, choice), currency, period

    def show(self, req, resp, session, *, code=200, form=None, message="", done="", preview=None) -> None:
        view, currency, period = self.listing(req, session.principal)
        self.page(
            req,
            resp,
            "networks.html",
            session,
            code,
            view=view,
            rows=view.rows,
            currency=currency,
            **chooser_context(NETWORK_TABLE, self.sets, session.principal, view),
            period=period.key,
            range_period=period,
            range_state={**view.state, "sort": view.sort.text},
            periods=PERIODS,
            status=view.state["status"],
            list_statuses=("current", *NETWORK_STATUSES, "all"),
            search=view.state["q"],
            sort_text=view.sort.text,
            done=done,
            templates=list(networks.catalogue().values()),
            catalogue_note=networks.catalogue_note(),
            form=form or BLANK_FORM,
            message=message,
            is_admin=session.principal.role == "admin",
            rule_choices=RULE_CHOICES,
            preview=preview,
        )

    def preview(self, req, plan) -> dict:
        """What the preview shows of a planned network: its postback URL as its page would give it."""
        key = read_secret(self.sessions.db, "postback_key")
        return {
            "plan": plan,
            "network": plan.network,
            "postback_url": networks.postback_url(plan.network, self.tracker_base(req), key),
        }

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        require_admin(session.principal)
        values = submitted(form, BLANK_FORM)
        # From a template, a macro left empty is the template's; without one, empty is none.
        options = {name: values[name] for name in (*networks.MACRO_FIELDS, "offer_params", "notes")}
        if values["template"]:
            options = {name: value for name, value in options.items() if value}
        options.update({name: values[name] for name in RULES if values[name]})
        if form.get("do") == "preview":
            try:
                plan = networks.plan_network(
                    self.sessions.db,
                    values["name"],
                    alias=values["alias"] or None,
                    from_template=values["template"] or None,
                    **options,
                )
            except AdminError as exc:
                self.show(req, resp, session, code=400, form=values, message=str(exc))
                return
            self.show(req, resp, session, form=values, preview=self.preview(req, plan))
            return
        try:
            network = networks.create_network(
                self.sessions.db,
                values["name"],
                alias=values["alias"] or None,
                from_template=values["template"] or None,
                actor=session.principal,
                **options,
            )
        except AdminError as exc:
            self.show(req, resp, session, code=400, form=values, message=str(exc))
            return
        resp.status = falcon.HTTP_303
        resp.location = f"{PATH}/{network.id}?done=created"


class NetworkCsvResource(NetworkListResource):
    """`GET /panel/networks.csv`: the list as shown (period, search, status and sort)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        view, _, period = self.listing(req, session.principal)
        send_csv(resp, view, f"lanner-networks-{period.slug}.csv")


class NetworkResource(PanelResource):
    """A network's page, and its forms' posts: `do` says which (save, map, unmap)."""

    def __init__(self, sessions: PanelSessions, render: Renderer, settings) -> None:
        super().__init__(sessions, render)
        self.tracker_base = CampaignBase(sessions, settings)  # The campaign URLs' host is the postbacks'.

    def network(self, network_id: int):
        try:
            return networks.get_network(self.sessions.db, network_id)
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None

    def on_get(self, req: falcon.Request, resp: falcon.Response, network_id: int) -> None:
        session = self.sessions.require(req)
        network = self.network(network_id)
        form = network_form(network)
        self.show(req, resp, session, network, form, done=DONE.get(req.get_param("done") or "", ""))

    def show(self, req, resp, session, network, form, *, code=200, message="", done="") -> None:
        is_admin = session.principal.role == "admin"
        key = read_secret(self.sessions.db, "postback_key") if is_admin else KEY_PLACEHOLDER
        self.page(
            req,
            resp,
            "network.html",
            session,
            code,
            network=network,
            form=form,
            message=message,
            done=done,
            is_admin=is_admin,
            postback_url=networks.postback_url(network, self.tracker_base(req), key),
            status_maps=networks.network_status_maps(self.sessions.db, network),
            statuses=STATUSES,
            network_statuses=NETWORK_STATUSES,
            rule_choices=RULE_CHOICES,
            offers=[
                o for o in visible_offers(self.sessions.db, session.principal) if o.network_id == network.id
            ],
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, network_id: int) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        network = self.network(network_id)
        require_admin(session.principal)
        db, actor, action = self.sessions.db, session.principal, form.get("do")
        values = submitted(form, (*FIELDS, "status"))
        values["status"] = values["status"] or network.status
        for name in RULES:
            values[name] = values[name] or getattr(network, name)
        try:
            if action == "save":
                networks.update_network(db, network.id, actor=actor, **values)
            elif action == "map":
                admin.map_status(
                    db,
                    str(form.get("word", "")),
                    str(form.get("status", "")),
                    network=network.alias,
                    actor=actor,
                )
            elif action == "unmap":
                admin.unmap_status(db, str(form.get("word", "")), network=network.alias, actor=actor)
            elif action == "delete":
                networks.delete_network(db, network.id, actor=actor)
                raise falcon.HTTPSeeOther(f"{PATH}?{urlencode({'deleted': network.alias})}")
            else:
                raise falcon.HTTPBadRequest(
                    title="Bad form", description="This form asks for nothing the page does."
                )
        except AdminError as exc:
            shown = values if action == "save" else network_form(network)
            self.show(req, resp, session, network, shown, code=400, message=str(exc))
            return
        resp.status = falcon.HTTP_303
        resp.location = f"{PATH}/{network.id}?done={AFTER[action]}"


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route(PATH, NetworkListResource(panel.sessions, panel.render, panel.reports, panel.settings))
    app.add_route(
        PATH + ".csv", NetworkCsvResource(panel.sessions, panel.render, panel.reports, panel.settings)
    )
    app.add_route(
        PATH + "/{network_id:int(min=1, max=9223372036854775807)}",
        NetworkResource(panel.sessions, panel.render, panel.settings),
    )
