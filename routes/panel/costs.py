"""A campaign's costs, /panel/campaigns/{id}/costs: a spend for a period spread over its clicks, or over the
clicks of every campaign of its traffic source, narrowed to zone or other sub id values (named as the
source names them), as `lanner cost set` and `/api/v1/costs` do; beside it the costs set for the campaign
and its source, per scope, and what the campaign's days cost so far.

Setting a cost replaces the costs of the period's clicks, so sending the same form twice gives the same
costs: the answer is the result page itself, not a redirect.
"""

from __future__ import annotations

import falcon

from models.accounts.access import edits_campaign, uneditable_campaigns
from models.admin.sources import source_of
from models.errors import LannerError
from models.reporting.costs import (
    COST_DIMENSIONS,
    cost_entries,
    cost_request,
    cost_scope,
    set_cost,
)
from models.routing.sources import loads, slot_of
from routes.panel.common import FormError, PanelContext, timezone_of
from routes.panel.editor import EditorResource

DAYS_SHOWN = 30
FIELDS = ("from", "to", "amount", "currency", "dimension", "value", "scope", "include_bots", "unique_only")
SUB_FIELD = "sub."  # The form's field of a source parameter: sub.zoneid


class CampaignCostResource(EditorResource):
    def __init__(self, panel: PanelContext) -> None:
        super().__init__(panel, None)
        self.reports = panel.reports

    def money_campaign(self, session, campaign_id: int, *, write: bool = False):
        principal = session.principal
        campaign = self.campaign(principal, campaign_id, write=write)
        if principal.hides_money:
            raise falcon.HTTPForbidden(
                title="Not allowed", description=f"{principal.name} sees no amounts, so has no costs page."
            )
        return campaign

    def show(self, req, resp, session, campaign, *, form=None, message="", spread=None, code=200) -> None:
        principal = session.principal
        report = self.reports.report(
            principal, {"group": "day", "preset": "last_30_days"}, {"campaign": str(campaign.id)}
        )
        source = source_of(campaign)
        self.page(
            req,
            resp,
            "costs.html",
            session,
            code,
            campaign=campaign,
            days=list(reversed(report.rows)) if report else [],
            currency=report.currency if report else self.reports.report_currency,
            form=form or {"currency": campaign.cost_currency, "dimension": "", "scope": "campaign"},
            dimensions=COST_DIMENSIONS,
            message=message,
            spread=spread,
            source=source,
            parameters=list(slot_of(loads(source.parameters))) if source else [],
            entries=cost_entries(self.db, campaign_ids=[campaign.id]),
            is_editable=principal.can_write and edits_campaign(self.db, principal, campaign.id),
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response, campaign_id: int) -> None:
        session = self.sessions.require(req)
        self.show(req, resp, session, self.money_campaign(session, campaign_id))

    def on_post(self, req: falcon.Request, resp: falcon.Response, campaign_id: int) -> None:
        session = self.sessions.require(req)
        form = self.write_form(req, session)
        principal = session.principal
        if not principal.can_write:
            raise falcon.HTTPForbidden(title="Read-only", description=f"{principal.name} may not set costs.")
        campaign = self.money_campaign(session, campaign_id, write=True)
        typed = {name: str(form.get(name, "")).strip() for name in FIELDS}
        sub_ids = {
            name: str(value).strip()
            for name, value in form.items()
            if name.startswith(SUB_FIELD) and str(value).strip()
        }
        typed.update(sub_ids)
        try:
            source = source_of(campaign) if typed["scope"] == "source" else None
            if typed["scope"] == "source" and source is None:
                raise FormError("The campaign has no traffic source to spread a cost over.")
            pairs = [(name.removeprefix(SUB_FIELD), value) for name, value in sub_ids.items()]
            scope = cost_scope(
                self.db,
                campaign=None if source else campaign,
                source=source,
                sub_ids=[*pairs, *where_of(typed)],
            )
            others = uneditable_campaigns(self.db, principal, scope.campaign_ids)
            if others:
                assert source is not None  # Only a source's cost reaches campaigns beyond this one.
                raise FormError(
                    f"You may not change campaign {others[0]} of traffic source {source.name!r}, so may not "
                    "set the source's cost."
                )
            request = cost_request(
                self.db,
                scope,
                typed["from"],
                typed["to"],
                amount_of(typed["amount"]),
                currency=typed["currency"] or None,
                timezone=timezone_of(principal),
                include_bots=bool(typed["include_bots"]),
                unique_only=bool(typed["unique_only"]),
            )
            spread = set_cost(self.db, request, actor=principal)
        except LannerError as exc:
            self.show(req, resp, session, campaign, form=typed, message=str(exc), code=400)
            return
        self.show(req, resp, session, campaign, form=typed, spread=spread)


def amount_of(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        raise FormError(f"The amount is a number such as 125.50, not {text!r}.") from None


def where_of(typed: dict[str, str]) -> list[tuple[str, str]]:
    """The form's slot field (a sub_id_N or source, and its value), if chosen."""
    if not typed["dimension"]:
        return []
    if typed["dimension"] not in COST_DIMENSIONS:
        raise FormError("A cost is for the whole campaign, or for one source or sub id value.")
    if not typed["value"]:
        raise FormError(f"Give the {typed['dimension']} value the cost is for.")
    return [(typed["dimension"], typed["value"])]


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel/campaigns/{campaign_id:int(min=1)}/costs", CampaignCostResource(panel))
