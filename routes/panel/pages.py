"""The panel's pages: login, logout and the campaign list (the dashboard is routes/panel/dashboard.py),
over the services the admin API calls (the report as routes/v1/reports.py asks for it, access as
models/accounts/access.py says).
"""

from __future__ import annotations

import csv
import io
import urllib.parse

import falcon

from models.accounts.access import (
    creates_campaigns,
    editable_campaign_ids,
    edits_campaign,
    visible_campaign_ids,
)
from models.accounts.logins import LoginRefused, LoginThrottled, log_in
from models.accounts.sessions import end_session, open_session
from models.admin.services import AdminError, get_campaign, list_campaigns, update_campaign
from models.admin.tags import campaign_tags, has_tag, tag_text
from models.choices import CAMPAIGN_STATUSES
from models.reporting.columnpages import CAMPAIGNS
from models.reporting.summary import total_of, total_without, with_ratios
from routes.panel.columnsets import ListSets
from routes.panel.common import (
    PERIODS,
    CampaignBase,
    ListFilter,
    PanelContext,
    PanelReports,
    PanelResource,
    chosen_period,
)
from routes.panel.render import Renderer
from routes.panel.reports import METRIC_LABELS, cell, csv_number, csv_text
from routes.panel.session import LOGIN_PATH, PanelSessions, read_form
from routes.panel.sorting import Sort


def safe_next(target: str | None) -> str:
    """Where to go after login: a path of this panel only (never another site)."""
    if (
        target
        and (target == "/panel" or target.startswith(("/panel/", "/panel?")))
        and target.isprintable()
        and not any(c in target for c in " \\")
    ):
        return target
    return "/panel"


class LoginResource(PanelResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.current(req)
        if session is not None:
            raise falcon.HTTPSeeOther(safe_next(req.get_param("next")))
        self.page(req, resp, "login.html", None, next=safe_next(req.get_param("next")), name="", message="")

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        # No session yet, so no token: a login form posted from another site is refused by its Origin.
        self.sessions.check_same_origin(req)
        form = read_form(req)
        name = str(form.get("name", "")).strip()
        target = safe_next(form.get("next"))
        try:
            user = log_in(
                self.sessions.db,
                name,
                str(form.get("password", "")),
                self.sessions.client_ip(req),
                **self.sessions.clock_options(),
            )
        except LoginThrottled as exc:
            resp.set_header("Retry-After", str(exc.retry_after))
            self.page(req, resp, "login.html", None, 429, next=target, name=name, message=str(exc))
            return
        except LoginRefused as exc:
            self.page(req, resp, "login.html", None, 401, next=target, name=name, message=str(exc))
            return
        old = self.sessions.current(req)
        if old is not None:  # A new id at every login; the old one ends.
            end_session(self.sessions.db, old.id)
        session = open_session(
            self.sessions.db, user, self.sessions.session_hours, **self.sessions.clock_options()
        )
        self.sessions.set_cookie(req, resp, session)
        resp.status = falcon.HTTP_303
        resp.location = target


class LogoutResource(PanelResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        self.sessions.check_write(req, session, read_form(req))
        end_session(self.sessions.db, session.id)
        self.sessions.clear_cookie(req, resp)
        resp.status = falcon.HTTP_303
        resp.location = LOGIN_PATH


# The campaign list's headers: the name, always first, then the columns a user chooses (column sets,
# models/reporting/columnpages.py CAMPAIGNS), the period's numbers of the report.
CAMPAIGN_LABELS = {"name": "Campaign", "status": "Status", **METRIC_LABELS}
TEXT_COLUMNS = ("name", "status")  # Sorted A to Z first; the numbers most first.


def campaign_value(row: dict, column: str):
    """What the list sorts a row by: a name case-blind, a number as shown (none: no value)."""
    if column == "name":
        return row["campaign"].name.lower()
    if column == "status":
        return row["campaign"].status
    return row["stats"].get(column)


class CampaignListResource(PanelResource):
    def __init__(self, sessions: PanelSessions, render: Renderer, reports: PanelReports, settings) -> None:
        super().__init__(sessions, render)
        self.reports = reports
        self.campaign_base = CampaignBase(sessions, settings)
        self.sets = ListSets(sessions.db, CAMPAIGNS)

    def listing(self, req: falcon.Request, principal) -> dict:
        """The list as the page shows it (and its CSV): the period, filters, columns and sort of the
        query (without columns: the user's default set's, and its sort without a sort)."""
        period = chosen_period(req)
        listing = ListFilter(req, CAMPAIGN_STATUSES)
        choice = self.sets.choice(req, principal)
        chosen, base = choice.columns, choice.base
        columns = [("name", CAMPAIGN_LABELS["name"])] + [(key, CAMPAIGN_LABELS[key]) for key in chosen]
        sort_text = req.get_param("sort")
        if sort_text is None:
            sort_text = choice.sort
        sort = Sort.parse(sort_text, [column for column, _ in columns])
        with_traffic = req.get_param("traffic") in ("1", "on")  # Only campaigns with clicks in the period.
        tag = tag_text(req.get_param("tag"))  # Only campaigns with this tag (case-blind).
        visible = visible_campaign_ids(self.sessions.db, principal)
        editable = editable_campaign_ids(self.sessions.db, principal)  # Once, not a query per row.
        report = self.reports(principal, "campaign", period)
        stats = {row["campaign"]: row for row in report.rows} if report else {}
        tags = campaign_tags(self.sessions.db, visible)
        rows = []
        for campaign in list_campaigns(self.sessions.db, include_archived=True):
            if visible is not None and campaign.id not in visible:
                continue
            if not listing.keeps(campaign.status, campaign.name, campaign.alias):
                continue
            row = with_ratios({}) | stats.get(campaign.id, {})
            if with_traffic and not row["clicks"]:
                continue
            if tag and not has_tag(tags.get(campaign.id, []), tag):
                continue
            rows.append(
                {
                    "campaign": campaign,
                    "stats": row,
                    "tags": tags.get(campaign.id, []),
                    "is_editable": editable is None or campaign.id in editable,
                }
            )
        rows = sort.apply(rows, campaign_value)
        without = {value for name, value in urllib.parse.parse_qsl(req.query_string) if name == "without"}
        ticked = [row for row in rows if str(row["campaign"].id) in without]
        state = {
            **period.query,
            "status": listing.status,
            "q": listing.search,
            "traffic": "1" if with_traffic else "",
            "tag": tag,
            "col": ",".join(chosen) if chosen != base else "",
            "sort": sort.text,
        }
        return {
            "chosen": chosen,
            "col_text": state["col"],
            "ticked": {row["campaign"].id for row in ticked},
            "total_less": total_without(
                total_of(row["stats"] for row in rows), [row["stats"] for row in ticked]
            )
            if ticked
            else None,
            "period": period,
            "with_traffic": with_traffic,
            "tag": tag,
            "tags": sorted({name for names in tags.values() for name in names}, key=str.lower),
            "listing": listing,
            "columns": columns,
            "sort": sort,
            "rows": rows,
            "total": total_of(row["stats"] for row in rows),
            "currency": report.currency if report else self.reports.report_currency,
            "query": urllib.parse.urlencode(
                {name: value for name, value in state.items() if value}, safe=","
            ),
        }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        principal = session.principal
        self.sets.redirect_for_controls(req, principal)
        shown = self.listing(req, principal)
        listing, sort = shown["listing"], shown["sort"]
        state = {
            **shown["period"].query,
            "status": listing.status,
            "q": listing.search,
            "traffic": "1" if shown["with_traffic"] else "",
            "tag": shown["tag"],
            "col": shown["col_text"],
        }
        state = {name: value for name, value in state.items() if value}
        back = "/panel/campaigns?" + urllib.parse.urlencode({**state, "sort": sort.text}, safe=",")
        self.page(
            req,
            resp,
            "campaigns.html",
            session,
            period=shown["period"].key,
            range_period=shown["period"],
            range_state={**state, "sort": sort.text},
            periods=PERIODS,
            status=listing.status,
            statuses=listing.choices,
            search=listing.search,
            traffic=shown["with_traffic"],
            tag=shown["tag"],
            tag_choices=shown["tags"],
            rows=shown["rows"],
            total=shown["total"],
            columns=shown["columns"][1:],
            cell=cell,
            ticked=shown["ticked"],
            total_less=shown["total_less"],
            cols_text=state.get("col", ""),
            chooser=self.sets.chooser(principal, CAMPAIGN_LABELS, shown["chosen"], sort.text, back),
            set_keep=[(n, v) for n, v in state.items() if n != "col"],
            currency=shown["currency"],
            base_url=self.campaign_base(req),
            can_create=creates_campaigns(principal),
            source_queries=source_queries(self.sessions.db),
            query=shown["query"],
            sort=sort,
            sort_text=sort.text,
            sort_links={
                column: urllib.parse.urlencode(
                    {**state, "sort": sort.clicked(column, is_descending_first=column not in TEXT_COLUMNS)},
                    safe=",",
                )
                for column, _ in shown["columns"]
            },
        )


class CampaignCsvResource(CampaignListResource):
    """`GET /panel/campaigns.csv`: the list as shown (period, search, status and sort), with its totals
    row; the numbers without separators, names kept from running as formulas, as the reports' CSV."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        shown = self.listing(req, session.principal)
        base, queries = self.campaign_base(req), source_queries(self.sessions.db)
        has_status = "status" in shown["chosen"]
        columns = [(key, header) for key, header in shown["columns"][1:] if key != "status"]
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(
            [
                "Campaign",
                "Alias",
                *(["Status"] if has_status else []),
                "Tags",
                *(h for _, h in columns),
                "URL",
            ]
        )
        for row in shown["rows"]:
            campaign = row["campaign"]
            url = base + urllib.parse.quote(campaign.alias) + queries.get(campaign.source_id, "")
            writer.writerow(
                [
                    csv_text(campaign.name),
                    csv_text(campaign.alias),
                    *([campaign.status] if has_status else []),
                    csv_text(", ".join(row["tags"])),
                    *(csv_number(column, row["stats"].get(column)) for column, _ in columns),
                    url,
                ]
            )
        total = shown["total"]
        writer.writerow(
            [
                "Total",
                "",
                *([""] if has_status else []),
                "",
                *(csv_number(column, total.get(column)) for column, _ in columns),
                "",
            ]
        )
        resp.content_type = "text/csv; charset=utf-8"
        resp.set_header("Cache-Control", "no-store")
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.set_header(
            "Content-Disposition", f'attachment; filename="lanner-campaigns-{shown["period"].slug}.csv"'
        )
        resp.text = out.getvalue()


def source_queries(db) -> dict[int, str]:
    """Source id -> `?zoneid={zoneid}&...`: what a campaign URL of that source carries (none: '')."""
    from models.admin.sources import list_sources
    from models.routing.sources import loads, template_text

    queries = {s.id: template_text(loads(s.parameters)) for s in list_sources(db, include_archived=True)}
    return {source_id: "?" + query for source_id, query in queries.items() if query}


class CampaignStatusResource(PanelResource):
    """Pause or resume a campaign from the list (a user who may change it; a viewer may not)."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, campaign_id: int) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        principal = session.principal
        db = self.sessions.db
        visible = visible_campaign_ids(db, principal)
        if visible is not None and campaign_id not in visible:
            raise falcon.HTTPNotFound(title="Not found", description=f"There is no campaign {campaign_id}.")
        if not principal.can_write or not edits_campaign(db, principal, campaign_id):
            raise falcon.HTTPForbidden(
                title="Read-only", description=f"{principal.name} may not change this campaign."
            )
        status = form.get("status")
        if status not in ("active", "paused"):
            raise falcon.HTTPBadRequest(
                title="Bad status", description="A campaign is set active or paused here."
            )
        try:
            get_campaign(db, campaign_id)
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None
        try:
            update_campaign(db, campaign_id, status=status, actor=principal)
        except AdminError as exc:
            raise falcon.HTTPBadRequest(title="Not changed", description=str(exc)) from None
        resp.status = falcon.HTTP_303
        back = urllib.parse.parse_qs(str(form.get("back") or ""))
        kept: dict[str, str] = {
            name: back[name][0]
            for name in ("period", "from", "to", "status", "q", "traffic", "tag", "sort")
            if name in back
        }
        resp.location = "/panel/campaigns?" + urllib.parse.urlencode(kept)


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    sessions, render, reports = panel.sessions, panel.render, panel.reports
    app.add_route("/panel/login", LoginResource(sessions, render))
    app.add_route("/panel/logout", LogoutResource(sessions, render))
    app.add_route("/panel/campaigns", CampaignListResource(sessions, render, reports, panel.settings))
    app.add_route("/panel/campaigns.csv", CampaignCsvResource(sessions, render, reports, panel.settings))
    app.add_route(
        "/panel/campaigns/{campaign_id:int(min=1)}/status", CampaignStatusResource(sessions, render)
    )
