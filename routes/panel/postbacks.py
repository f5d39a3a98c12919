"""Postback set-up (/panel/postbacks): the URL to paste into an affiliate network, the outbound
postback targets (list, add, remove, send a test) and the status maps, over models/conversions/admin.py
with the rules routes/v1/postbacks.py applies.

The postback key is install-wide, like the status maps: only an admin is shown it (the admin API
answers it to nobody; the CLI's `lanner postback key show` is the server operator's). Everyone else
sees the URL with a placeholder where the key goes.
"""

from __future__ import annotations

from typing import Any

import falcon

from models.accounts.access import editable_campaign_ids, edits_campaign, visible_campaign_ids
from models.admin.services import AdminError, get_campaign, list_campaigns
from models.choices import POSTBACK_METHODS
from models.conversions import admin
from models.conversions.postbacks import STATUSES, read_secret
from routes.panel.common import CampaignBase, PanelContext, PanelResource
from routes.panel.flash import Flash
from routes.panel.render import Renderer
from routes.panel.session import PanelSessions, read_form, read_form_lists

PATH = "/panel/postbacks"
KEY_PLACEHOLDER = "POSTBACK-KEY"
# README, "Conversions: postbacks in, postbacks out": what a network may send.
PARAMETERS = (
    ("subid", "the click's subid (required); also clickid, click_id"),
    ("status", "the network's word; no status means sale"),
    ("payout, currency", "default to the offer's payout and currency"),
    ("tid", "the network's transaction id: one conversion per (subid, tid); also transaction_id"),
    ("from", "the network's name, for its own status map"),
    ("lead_status, sale_status, …", "in-URL status maps, e.g. sale_status=approved,paid"),
    ("sub_id_N", "stored on the click"),
)
DONE = {
    "added": "Target added.",
    "removed": "Target removed; its delivery history stays.",
    "mapped": "Status map saved; stored conversions with that word took it.",
    "unmapped": "Status map removed.",
}
TARGET_MACROS = "{subid}, {sub_id_1}…, {status}, {payout}, {revenue}, {currency}, {tid}, {conversion_id}"


class PostbackSetupResource(PanelResource):
    """The page, and its forms' posts: `do` says which form (add, test, remove, test_target, map, unmap)."""

    def __init__(self, sessions: PanelSessions, render: Renderer, settings) -> None:
        super().__init__(sessions, render)
        self.tracker_base = CampaignBase(sessions, settings)  # The campaign URLs' host is the postbacks'.

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        tested = Flash(self.sessions).take(req, resp, session)
        if tested is not None:  # Back from a test: its result, once (a reload sends no second test).
            self.show(req, resp, session, form=tested["form"], result=tested["result"])
            return
        self.show(req, resp, session, done=DONE.get(req.get_param("done") or "", ""))

    def show(self, req, resp, session, *, code=200, form=None, message="", result=None, done="") -> None:
        principal, db = session.principal, self.sessions.db
        is_admin = principal.role == "admin"
        key = read_secret(db, "postback_key") if is_admin else KEY_PLACEHOLDER
        base = self.tracker_base(req).rstrip("/")
        visible = visible_campaign_ids(db, principal)
        editable = editable_campaign_ids(db, principal)
        campaigns = {c.id: c for c in list_campaigns(db, include_archived=True)}
        targets = [t for t in admin.list_targets(db) if visible is None or t["campaign_id"] in visible]
        for target in targets:
            target["campaign"] = campaigns.get(target["campaign_id"])
            target["is_editable"] = editable is None or target["campaign_id"] in editable
        choices = [
            c for c in campaigns.values() if c.status != "archived" and (editable is None or c.id in editable)
        ]
        self.page(
            req,
            resp,
            "postbacks.html",
            session,
            code,
            is_admin=is_admin,
            postback_url=f"{base}/{key}/postback?subid={{subid}}&status={{status}}&payout={{payout}}&tid={{tid}}",
            query_url=f"{base}/postback?key={key}&subid={{subid}}&status={{status}}&payout={{payout}}&tid={{tid}}",
            pixel_url=f"{base}/px/conversion?key={key}&status=lead",
            parameters=PARAMETERS,
            macros=TARGET_MACROS,
            targets=targets,
            campaign_choices=choices,
            statuses=STATUSES,
            methods=POSTBACK_METHODS,
            status_maps=admin.list_status_maps(db),
            form=form or {"campaign": "", "url": "", "statuses": ["sale"], "method": "GET"},
            message=message,
            result=result,
            done=done,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        principal, db = session.principal, self.sessions.db
        action = form.get("do")
        if action in ("map", "unmap") and principal.role != "admin":
            raise falcon.HTTPForbidden(
                title="Not allowed", description="Only an admin may change status maps."
            )
        if action in ("add", "test"):
            lists = read_form_lists(req)
            entered: dict[str, Any] = {
                "campaign": str(form.get("campaign", "")),
                "url": str(form.get("url", "")).strip(),
                "statuses": lists.get("statuses", []),
                "method": str(form.get("method", "GET")),
            }
            self.require_campaign(principal, entered["campaign"])
            try:
                if action == "add":
                    admin.add_target(
                        db,
                        entered["campaign"],
                        entered["url"],
                        entered["statuses"],
                        method=entered["method"],
                        actor=principal,
                    )
                    self.back(resp, "added")
                    return
                status = entered["statuses"][0] if entered["statuses"] else "sale"
                result = admin.test_target(entered["url"], method=entered["method"], status=status) | {
                    "target": None
                }
            except AdminError as exc:
                self.show(req, resp, session, code=400, form=entered, message=str(exc))
                return
            self.tested(req, resp, session, entered, result)
            return
        if action in ("remove", "test_target"):
            target = self.target(principal, form.get("target"))
            if action == "remove":
                admin.remove_target(db, target["id"], actor=principal)
                self.back(resp, "removed")
                return
            status = target["statuses"].split(",")[0]
            result = admin.test_target(target["url"], method=target["method"], status=status)
            self.tested(req, resp, session, None, result | {"target": target["id"]})
            return
        if action in ("map", "unmap"):
            try:
                if action == "map":
                    admin.map_status(
                        db,
                        str(form.get("word", "")),
                        str(form.get("status", "")),
                        network=str(form.get("network", "")),
                        actor=principal,
                    )
                else:
                    admin.unmap_status(
                        db, str(form.get("word", "")), network=str(form.get("network", "")), actor=principal
                    )
            except AdminError as exc:
                self.show(req, resp, session, code=400, message=str(exc))
                return
            self.back(resp, "mapped" if action == "map" else "unmapped")
            return
        raise falcon.HTTPBadRequest(title="Bad form", description="This form asks for nothing the page does.")

    def require_campaign(self, principal, ref: str) -> None:
        """As the API's require_campaign for a write: 404 for a campaign not visible, 403 if not editable."""
        try:
            campaign_id = get_campaign(self.sessions.db, ref).id
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None
        visible = visible_campaign_ids(self.sessions.db, principal)
        if visible is not None and campaign_id not in visible:
            raise falcon.HTTPNotFound(title="Not found", description=f"There is no campaign {ref!r}.")
        if not edits_campaign(self.sessions.db, principal, campaign_id):
            raise falcon.HTTPForbidden(
                title="Read-only", description=f"{principal.name} may not change campaign {campaign_id}."
            )

    def target(self, principal, target_id) -> dict:
        targets = {str(t["id"]): t for t in admin.list_targets(self.sessions.db)}
        target = targets.get(str(target_id))
        if target is None:
            raise falcon.HTTPNotFound(
                title="Not found", description="There is no such active postback target."
            )
        self.require_campaign(principal, str(target["campaign_id"]))
        return target

    def tested(self, req, resp, session, form: dict | None, result: dict) -> None:
        """A test's result shown by the GET this redirects to; in this answer if too long for the cookie."""
        if not Flash(self.sessions).put(req, resp, session, PATH, {"form": form, "result": result}):
            self.show(req, resp, session, form=form, result=result)

    @staticmethod
    def back(resp: falcon.Response, done: str) -> None:
        resp.status = falcon.HTTP_303
        resp.location = f"{PATH}?done={done}"


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route(PATH, PostbackSetupResource(panel.sessions, panel.render, panel.settings))
