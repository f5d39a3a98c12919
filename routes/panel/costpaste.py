"""Many zone costs at once, /panel/campaigns/{id}/costs/paste: a column of "zone<TAB>amount" lines pasted
(or a text file uploaded) for one period, previewed line by line, then applied in one transaction
(models/reporting/costpaste.py). The form posts twice: `preview` shows what each line would do and
changes nothing; `apply` checks the same text again and sets it. The answer is the page itself: the same
paste applied twice gives the same costs.
"""

from __future__ import annotations

import falcon

from models.admin.sources import source_of
from models.errors import LannerError
from models.reporting.costpaste import MAX_LINES, STATUSES, apply_paste, plan_paste
from models.reporting.costs import COST_DIMENSIONS
from models.routing.sources import loads, slot_of
from routes.panel.common import PanelContext, timezone_of
from routes.panel.costs import CampaignCostResource
from routes.panel.session import read_form

MAX_PASTE_BYTES = 256 * 1024  # MAX_LINES lines of long zone ids and amounts, with the form around them.
FIELDS = ("from", "to", "parameter", "currency", "include_bots", "unique_only", "paste")
ACTIONS = ("preview", "apply")


def read_paste_form(req: falcon.Request) -> dict[str, str]:
    """The form's fields as text, from a urlencoded body or a multipart one carrying a text file
    (`file`, which wins over the textarea when chosen), at most MAX_PASTE_BYTES (413 past it, unread)."""
    if req.content_length is None:
        raise falcon.HTTPLengthRequired(title="Length required", description="Send the form with its length.")
    if req.content_length > MAX_PASTE_BYTES:
        raise falcon.HTTPContentTooLarge(
            title="Paste too large",
            description=f"A paste takes at most {MAX_PASTE_BYTES >> 10} KB ({MAX_LINES:,} lines); split it.",
        )
    if (req.content_type or "").split(";")[0].strip().lower() != falcon.MEDIA_MULTIPART:
        return {name: str(value) for name, value in read_form(req).items()}
    fields: dict[str, str] = {}
    try:
        for part in req.get_media():
            if part.name in (*FIELDS, "csrf_token", "action", "file") and part.name not in fields:
                # The body is bounded above, so reading a part whole is too.
                fields[part.name] = part.stream.read().decode("utf-8-sig")
            else:
                part.stream.read()
    except UnicodeDecodeError:
        raise falcon.HTTPBadRequest(title="Bad file", description="The file is not UTF-8 text.") from None
    if fields.get("file", "").strip():
        fields["paste"] = fields["file"]
    return fields


class CostPasteResource(CampaignCostResource):
    def zone_parameters(self, campaign) -> list[str]:
        """What a zone may be named by: the traffic source's parameters first (zoneid), then the columns."""
        source = source_of(campaign)
        named = list(slot_of(loads(source.parameters))) if source else []
        return [*named, *COST_DIMENSIONS]

    def show_paste(self, req, resp, session, campaign, form, *, plan=None, done=None, message="", code=200):
        parameters = self.zone_parameters(campaign)
        if not form.get("parameter"):
            zones = [name for name in parameters if "zone" in name.lower()]
            form = {**form, "parameter": zones[0] if zones else parameters[0]}
        self.page(
            req,
            resp,
            "costs_paste.html",
            session,
            code,
            campaign=campaign,
            form=form,
            parameters=parameters,
            plan=plan,
            done=done,
            statuses=STATUSES,
            message=message,
            max_lines=MAX_LINES,
            max_kb=MAX_PASTE_BYTES >> 10,
        )

    def on_get(self, req: falcon.Request, resp: falcon.Response, campaign_id: int) -> None:
        session = self.sessions.require(req)
        self.require_writer(session)
        campaign = self.money_campaign(session, campaign_id, write=True)
        self.show_paste(req, resp, session, campaign, {"currency": campaign.cost_currency})

    def require_writer(self, session) -> None:
        principal = session.principal
        if not principal.can_write:
            raise falcon.HTTPForbidden(title="Read-only", description=f"{principal.name} may not set costs.")

    def on_post(self, req: falcon.Request, resp: falcon.Response, campaign_id: int) -> None:
        session = self.sessions.require(req)
        fields = read_paste_form(req)
        self.sessions.check_write(req, session, fields)
        self.require_writer(session)
        campaign = self.money_campaign(session, campaign_id, write=True)
        action = fields.get("action", "preview")
        if action not in ACTIONS:
            raise falcon.HTTPBadRequest(title="Bad action", description="Preview the paste, then apply it.")
        form = {name: fields.get(name, "").strip() for name in FIELDS}
        form["paste"] = fields.get("paste", "")
        try:
            plan = plan_paste(
                self.db,
                campaign,
                form["paste"],
                form["parameter"],
                form["from"],
                form["to"],
                currency=form["currency"] or None,
                timezone=timezone_of(session.principal),
                include_bots=bool(form["include_bots"]),
                unique_only=bool(form["unique_only"]),
            )
            if action == "preview":
                self.show_paste(req, resp, session, campaign, form, plan=plan)
                return
            if not plan.applied:
                raise LannerError("No line of the paste can be set; the preview says why for each.")
            done = apply_paste(self.db, plan, actor=session.principal)
        except LannerError as exc:
            self.show_paste(req, resp, session, campaign, form, message=str(exc), code=400)
            return
        self.show_paste(req, resp, session, campaign, form, plan=plan, done=done)


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel/campaigns/{campaign_id:int(min=1)}/costs/paste", CostPasteResource(panel))
