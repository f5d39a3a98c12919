"""Bulk edits of offers (/panel/offers/bulk) and of a campaign's streams
(/panel/campaigns/{id}/streams/bulk): tick rows, choose a status (and for streams a weight) or a text to
find and replace in their URLs, preview each row's before → after, then apply them in one transaction
(models/admin/bulkedit.py). The same rules as a single edit: an offer the user sees and a user who may
change offers; a stream of a campaign the user may change.
"""

from __future__ import annotations

import falcon

from models.accounts.access import creates_campaigns, visible_offer_ids
from models.admin.bulkedit import (
    MAX_ITEMS,
    STREAM_BULK_STATUSES,
    BulkChange,
    apply_offer_edits,
    apply_stream_edits,
    plan_offer_edits,
    plan_stream_edits,
)
from models.admin.errors import AdminError
from models.admin.services import list_offers, list_streams
from models.choices import OFFER_STATUSES
from routes.panel.common import FormError, PanelContext, PanelResource, back_to
from routes.panel.editor import EditorResource
from routes.panel.session import read_form_lists

ACTIONS = ("preview", "apply")


def read_ids(values: list[str], what: str) -> list[int]:
    if len(values) > MAX_ITEMS:
        raise falcon.HTTPBadRequest(title="Too many", description=f"Change at most {MAX_ITEMS} at a time.")
    ids = []
    for value in values:
        if not (value.isascii() and value.isdigit()) or not 0 < int(value) < 2**63:
            raise falcon.HTTPBadRequest(title=f"Bad {what}", description=f"{value[:20]!r} is no {what} id.")
        ids.append(int(value))
    return list(dict.fromkeys(ids))


def read_change(form: dict[str, str], *, has_weight: bool) -> BulkChange:
    weight = form.get("weight", "").strip() if has_weight else ""
    if weight and not (weight.isascii() and weight.isdigit() and len(weight) <= 7):
        raise FormError("A stream weight is a whole number from 0 to 1,000,000.")
    return BulkChange(
        status=form.get("status", "").strip() or None,
        weight=int(weight) if weight else None,
        find=form.get("find", ""),
        replace=form.get("replace", ""),
    )


def first_values(lists: dict[str, list[str]]) -> dict[str, str]:
    return {name: values[0] for name, values in lists.items() if values and name != "ids"}


class BulkPage(PanelResource):
    """The page both bulk edits share: the rows to tick, the change, the preview or the result. Its
    query is the list's it came from (filters, sort, period): the form posts back to the same URL, so
    the link back shows that list as it was through every preview and apply."""

    kind = ""
    statuses: tuple[str, ...] = ()
    has_weight = False

    def show(
        self,
        req,
        resp,
        session,
        rows,
        *,
        form=None,
        ticked=(),
        items=None,
        done=False,
        message="",
        code=200,
        **extra,
    ):
        extra.setdefault("campaign", None)
        self.page(
            req,
            resp,
            "bulk_edit.html",
            session,
            code,
            kind=self.kind,
            rows=rows,
            form=form or {},
            ticked=set(ticked),
            items=items,
            done=done,
            message=message,
            statuses=self.statuses,
            has_weight=self.has_weight,
            max_items=MAX_ITEMS,
            **extra,
        )

    def handle(self, req, resp, session, rows, apply, plan, **extra) -> None:
        lists = read_form_lists(req)
        form = first_values(lists)
        self.sessions.check_write(req, session, form)
        action = form.get("do", "preview")
        if action not in ACTIONS:
            raise falcon.HTTPBadRequest(title="Bad action", description="Preview the change, then apply it.")
        ids = read_ids(lists.get("ids", []), self.kind)
        by_id = {row.id: row for row in rows}
        for item_id in ids:
            if item_id not in by_id:
                raise falcon.HTTPNotFound(
                    title="Not found", description=f"There is no {self.kind} {item_id}."
                )
        chosen = [by_id[item_id] for item_id in ids]
        try:
            change = read_change(form, has_weight=self.has_weight)
            if action == "preview":
                items = plan(self.sessions.db, chosen, change, actor=session.principal)
                self.show(req, resp, session, rows, form=form, ticked=ids, items=items, **extra)
                return
            items = apply(self.sessions.db, chosen, change, actor=session.principal)
        except (FormError, AdminError) as exc:
            self.show(req, resp, session, rows, form=form, ticked=ids, message=str(exc), code=400, **extra)
            return
        # The rows as they are now, for the next change.
        self.show(
            req,
            resp,
            session,
            self.rows(session, **extra),
            form=form,
            ticked=ids,
            items=items,
            done=True,
            **extra,
        )

    def rows(self, session, **extra) -> list:
        raise NotImplementedError


class OfferBulkResource(BulkPage):
    kind = "offer"
    statuses = OFFER_STATUSES

    def rows(self, session, **extra) -> list:
        visible = visible_offer_ids(self.sessions.db, session.principal)
        return [o for o in list_offers(self.sessions.db) if visible is None or o.id in visible]

    def require_editor(self, principal) -> None:
        if not creates_campaigns(principal):
            raise falcon.HTTPForbidden(
                title="Read-only", description=f"{principal.name} may not create or change offers."
            )

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        self.require_editor(session.principal)
        self.show(req, resp, session, self.rows(session), back=back_to("/panel/offers", req.query_string))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        self.require_editor(session.principal)
        rows = self.rows(session)
        back = back_to("/panel/offers", req.query_string)
        self.handle(req, resp, session, rows, apply_offer_edits, plan_offer_edits, back=back)


class StreamBulkResource(BulkPage, EditorResource):
    kind = "stream"
    statuses = STREAM_BULK_STATUSES
    has_weight = True

    def __init__(self, panel: PanelContext) -> None:
        EditorResource.__init__(self, panel, None)

    def rows(self, session, **extra) -> list:
        return [s for s in list_streams(self.db, extra["campaign"].id) if s.status != "deleted"]

    def on_get(self, req: falcon.Request, resp: falcon.Response, campaign_id: int) -> None:
        session = self.sessions.require(req)
        campaign = self.campaign(session.principal, campaign_id, write=True)
        extra = {"campaign": campaign, "back": back_to(f"/panel/campaigns/{campaign.id}", req.query_string)}
        self.show(req, resp, session, self.rows(session, **extra), **extra)

    def on_post(self, req: falcon.Request, resp: falcon.Response, campaign_id: int) -> None:
        session = self.sessions.require(req)
        campaign = self.campaign(session.principal, campaign_id, write=True)
        extra = {"campaign": campaign, "back": back_to(f"/panel/campaigns/{campaign.id}", req.query_string)}
        rows = self.rows(session, **extra)
        self.handle(req, resp, session, rows, apply_stream_edits, plan_stream_edits, **extra)


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route("/panel/offers/bulk", OfferBulkResource(panel.sessions, panel.render))
    app.add_route("/panel/campaigns/{campaign_id:int(min=1)}/streams/bulk", StreamBulkResource(panel))
