"""Offers: URL templates with macros, payouts and caps, over models/admin/services.py."""

from __future__ import annotations

import falcon

from models.accounts.access import visible_offer, visible_offers
from models.admin import services
from models.admin.views import offer_fields
from models.choices import OFFER_STATUSES
from routes.v1.auth import require_creator
from routes.v1.pagination import page
from routes.v1.spec import PAGE_PARAMS, Field, Operation, answer, api_resource, read_body

OFFER_CREATE = (
    Field("name", "string", required=True),
    Field("url", "string", "URL template, e.g. https://example.com/?click={subid}.", required=True),
    Field("payout", "number"),
    Field("currency", "string", "The payout's currency (default: the report currency)."),
    Field("daily_cap", "integer", "Clicks per local day."),
    Field("total_cap", "integer", "Clicks in total."),
    Field("timezone", "string", "Where the daily cap's day starts."),
    Field("network_id", "integer", "The affiliate network paying for it (GET /networks)."),
)
OFFER_UPDATE = (
    *(Field(f.name, f.type, f.about) for f in OFFER_CREATE),
    Field("status", "string", ", ".join(OFFER_STATUSES)),
    Field("clear_caps", "boolean", "Remove both caps."),
    Field("clear_network", "boolean", "Belong to no network."),
)


def _with_warnings(db, offer) -> dict:
    """The offer with `warnings`: its currency's missing exchange rate, if it has none (accepted)."""
    return {**offer_fields(offer), "warnings": services.rate_warnings(db, offer.currency)}


@api_resource
class OfferListResource:
    operations = {
        "GET": Operation(
            "Offers, by id: for a buyer or viewer those its campaigns use and those no campaign uses.",
            params=PAGE_PARAMS,
            paginated=True,
        ),
        "POST": Operation(
            "Create an offer; `warnings` says if its currency has no exchange rate (it is accepted).",
            body=OFFER_CREATE,
            answers={201: "Created."},
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        offers = visible_offers(self.db, req.context.principal)
        items, following = page(req, offers, lambda o: [o.id])
        answer(req, resp, {"items": [offer_fields(o) for o in items], "next": following})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, OFFER_CREATE)
        require_creator(req, "offers")
        offer = services.create_offer(
            self.db, body.pop("name"), body.pop("url"), actor=req.context.principal, **body
        )
        answer(req, resp, _with_warnings(self.db, offer), falcon.HTTP_201)


@api_resource
class OfferResource:
    operations = {
        "GET": Operation("An offer."),
        "PATCH": Operation(
            "Change an offer; fields left out stay (archive: status archived).", body=OFFER_UPDATE
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response, offer_id: int) -> None:
        answer(req, resp, offer_fields(visible_offer(self.db, req.context.principal, offer_id)))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, offer_id: int) -> None:
        body = read_body(req, OFFER_UPDATE)
        visible_offer(self.db, req.context.principal, offer_id)
        require_creator(req, "or change offers")
        offer = services.update_offer(self.db, offer_id, actor=req.context.principal, **body)
        answer(req, resp, _with_warnings(self.db, offer) if "currency" in body else offer_fields(offer))
