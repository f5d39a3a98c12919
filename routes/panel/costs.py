"""A campaign's costs, /panel/campaigns/{id}/costs: a spend for a period spread over its clicks (or those
with one source or sub id value), as `lanner cost set` and `PUT /api/v1/costs` do, beside what the
campaign's days cost so far.

Setting a cost replaces the costs of the period's clicks, so sending the same form twice gives the same
costs: the answer is the result page itself, not a redirect.
"""

from __future__ import annotations

import falcon

from models.accounts.access import edits_campaign
from models.errors import LannerError
from models.reporting.costs import COST_DIMENSIONS, set_campaign_cost
from routes.panel.common import FormError, PanelContext, timezone_of
from routes.panel.editor import EditorResource

DAYS_SHOWN = 30
FIELDS = ("from", "to", "amount", "currency", "dimension", "value")


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
        self.page(
            req, resp, "costs.html", session, code,
            campaign=campaign, days=list(reversed(report.rows)) if report else [],
            currency=report.currency if report else self.reports.report_currency,
            form=form or {"currency": campaign.cost_currency, "dimension": ""},
            dimensions=COST_DIMENSIONS, message=message, spread=spread,
            is_editable=principal.can_write and edits_campaign(self.db, principal, campaign.id),
        )  # fmt: skip

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
        try:
            spread = set_campaign_cost(
                self.db, campaign.id, typed["from"], typed["to"], amount_of(typed["amount"]),
                cost_currency=campaign.cost_currency, timezone=timezone_of(principal),
                currency=typed["currency"] or None, where=where_of(typed), actor=principal,
            )  # fmt: skip
        except LannerError as exc:
            self.show(req, resp, session, campaign, form=typed, message=str(exc), code=400)
            return
        self.show(req, resp, session, campaign, form=typed, spread=spread)


def amount_of(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        raise FormError(f"The amount is a number such as 125.50, not {text!r}.") from None


def where_of(typed: dict[str, str]) -> tuple[str, str] | None:
    if not typed["dimension"]:
        return None
    if typed["dimension"] not in COST_DIMENSIONS:
        raise FormError("A cost is for the whole campaign, or for one source or sub id value.")
    if not typed["value"]:
        raise FormError(f"Give the {typed['dimension']} value the cost is for.")
    return typed["dimension"], typed["value"]


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel/campaigns/{campaign_id:int(min=1)}/costs", CampaignCostResource(panel))
