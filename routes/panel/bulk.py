"""Bulk actions on the campaign list: archive or clone the checked campaigns
(`POST /panel/campaigns/bulk`), through the services `lanner campaign archive|clone` call."""

from __future__ import annotations

import falcon

from models.accounts.access import creates_campaigns, editable_campaign_ids, visible_campaign_ids
from models.admin.services import AdminError, archive_campaign, clone_campaign, get_campaign
from routes.panel.common import PanelContext, PanelResource, back_to
from routes.panel.session import read_form, read_form_lists

ACTIONS = ("archive", "clone")
MAX_CAMPAIGNS = 500  # One form's worth; each is its own transaction.


def checked_ids(values: list[str]) -> list[int]:
    ids = []
    for value in values:
        if not (value.isascii() and value.isdigit()) or not 0 < int(value) < 2**63:
            raise falcon.HTTPBadRequest(
                title="Bad campaign", description=f"{value[:20]!r} is no campaign id."
            )
        ids.append(int(value))
    return list(dict.fromkeys(ids))


class CampaignBulkResource(PanelResource):
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        principal, db = session.principal, self.sessions.db
        action = form.get("action")
        if action not in ACTIONS:
            raise falcon.HTTPBadRequest(title="Bad action", description="Choose Archive or Clone.")
        ids = checked_ids(read_form_lists(req).get("ids", []))
        if not ids:
            raise falcon.HTTPBadRequest(title="Nothing chosen", description="Tick the campaigns first.")
        if len(ids) > MAX_CAMPAIGNS:
            raise falcon.HTTPBadRequest(
                title="Too many", description=f"Choose at most {MAX_CAMPAIGNS} campaigns at a time."
            )
        # Every campaign is checked before any is changed: a refusal changes nothing.
        visible = visible_campaign_ids(db, principal)
        editable = editable_campaign_ids(db, principal)
        for campaign_id in ids:
            if visible is not None and campaign_id not in visible:
                raise falcon.HTTPNotFound(
                    title="Not found", description=f"There is no campaign {campaign_id}."
                )
            try:
                get_campaign(db, campaign_id)
            except AdminError as exc:
                raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None
            if editable is not None and campaign_id not in editable:
                raise falcon.HTTPForbidden(
                    title="Read-only", description=f"{principal.name} may not change campaign {campaign_id}."
                )
        if action == "clone" and not creates_campaigns(principal):
            raise falcon.HTTPForbidden(
                title="Not allowed", description=f"{principal.name} may not create campaigns."
            )
        try:
            for campaign_id in ids:
                if action == "clone":
                    clone_campaign(db, campaign_id, actor=principal)
                elif get_campaign(db, campaign_id).status != "archived":
                    archive_campaign(db, campaign_id, actor=principal)
        except AdminError as exc:
            raise falcon.HTTPBadRequest(title="Not done", description=str(exc)) from None
        resp.status = falcon.HTTP_303
        # The list as it was shown: every filter, the sort, the columns and the period.
        resp.location = back_to("/panel/campaigns", str(form.get("back") or ""))


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel/campaigns/bulk", CampaignBulkResource(panel.sessions, panel.render))
