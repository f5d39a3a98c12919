"""Costs: a spend for a period spread over the clicks of a campaign or of every campaign of a traffic
source, narrowed by sub id values (models/reporting/costs.py, as `lanner cost set`), and the costs set.

`PUT` sets one; `POST` a batch, for scripts syncing spend from ad platforms: every item is checked
first (its fields, its campaign or source and the principal's right to it, its amount, currency and
period, and that it has clicks to spread over), and if any is refused nothing is set and the answer
names each refused item by its index. A set replaces the costs of its clicks, so the same batch sent
twice gives the same costs (and the same list of costs set).
"""

from __future__ import annotations

import dataclasses

import falcon

from models.accounts.access import uneditable_campaigns
from models.admin.services import get_campaign
from models.admin.sources import get_source
from models.errors import LannerError
from models.reporting.costs import check_clicks, cost_entries, cost_request, cost_scope, set_cost
from routes.v1.auth import require_campaign, visible_campaigns
from routes.v1.spec import Field, Operation, Param, answer, api_resource, check_object, read_body, refused

MAX_BATCH = 100  # Items in one POST: each may spread over a million clicks.

COST_SET = (
    Field("campaign", "string", "Campaign id or alias (or give `source`)."),
    Field("source", "string", "Traffic source id or name: the clicks of all its campaigns, pooled."),
    Field("from", "string", "YYYY-MM-DD or YYYY-MM-DDTHH:MM in `timezone`, inclusive.", required=True),
    Field("to", "string", "YYYY-MM-DD (the whole day) or YYYY-MM-DDTHH:MM, exclusive.", required=True),
    Field("amount", "number", "The total spend for the period.", required=True),
    Field(
        "currency",
        "string",
        "The amount's currency (default: the campaign's cost currency; for a source the report currency).",
    ),
    Field("timezone", "string", "IANA name for from/to (default UTC)."),
    Field(
        "sub_ids",
        "labels",
        "Only the clicks with these values, named as the traffic source names them or by slot: "
        '{"zoneid": "4417", "sub_id_3": "x"}.',
    ),
    Field("include_bots", "boolean", "Spread over bot clicks too (default false: bots get cost 0)."),
    Field("unique_only", "boolean", "Spread over unique clicks only (repeats get cost 0)."),
    Field("dimension", "string", "Older form of one sub id: source or sub_id_1 … sub_id_30, with `value`."),
    Field("value", "string", "The source or sub id value (with `dimension`)."),
)
COST_BATCH = (
    Field("costs", "objects", f"1 to {MAX_BATCH} costs, set in this order.", required=True, items=COST_SET),
)


def _request(req: falcon.Request, db, item: dict, what: str = "The body"):
    """One item as a CostRequest after the principal's rights to it are checked; falcon errors for
    anything refused."""
    body = check_object(item, COST_SET, what)
    if ("campaign" in body) == ("source" in body):
        raise falcon.HTTPBadRequest(title="Refused", description="Give campaign or source (one of them).")
    if ("dimension" in body) != ("value" in body):
        raise falcon.HTTPBadRequest(title="Refused", description="Give dimension and value together.")
    sub_ids = list(body.get("sub_ids", {}).items())
    if "dimension" in body:
        sub_ids.append((body["dimension"], body["value"]))
    principal = req.context.principal
    try:
        if "campaign" in body:
            campaign = get_campaign(db, body["campaign"])
            require_campaign(req, campaign.id)
            scope = cost_scope(db, campaign=campaign, sub_ids=sub_ids)
        else:
            source = get_source(db, body["source"])
            scope = cost_scope(db, source=source, sub_ids=sub_ids)
            others = uneditable_campaigns(db, principal, scope.campaign_ids)
            if others:
                raise falcon.HTTPForbidden(
                    title="Not allowed",
                    description=f"{principal.name} may not change campaign {others[0]} of traffic source "
                    f"{source.name!r}, so may not set the source's cost.",
                )
        request = cost_request(
            db,
            scope,
            body["from"],
            body["to"],
            body["amount"],
            currency=body.get("currency"),
            timezone=body.get("timezone", "UTC"),
            include_bots=body.get("include_bots", False),
            unique_only=body.get("unique_only", False),
        )
        check_clicks(db, request)
    except LannerError as exc:
        raise refused(exc) from None
    return request


def _require_money(req: falcon.Request, what: str = "may not set costs") -> None:
    principal = req.context.principal
    if principal.hides_money:  # The panel offers them no costs page either.
        description = f"{principal.name} sees no amounts, so {what}."
        raise falcon.HTTPForbidden(title="Not allowed", description=description)


@api_resource
class CostResource:
    operations = {
        "GET": Operation(
            "The costs set, newest first, each with its scope; one a later set covered is dropped.",
            params=(Param("campaign", "Only this campaign's (and its source's)."), Param("source")),
        ),
        "PUT": Operation(
            "Replace the costs of a campaign's (or a traffic source's) clicks in a period, or of those with "
            "these sub id values, with an amount spread evenly over them.",
            body=COST_SET,
        ),
        "POST": Operation(
            "Set a batch of costs (as PUT each, in order): all of them, or none if any is refused (400 "
            "with `errors`, one per refused item: its `index`, `status` and `description`).",
            body=COST_BATCH,
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _require_money(req, "has no costs to list")
        campaign_ids, source_id = None, None
        if "campaign" in req.params:
            campaign = get_campaign(self.db, req.get_param("campaign", required=True))
            require_campaign(req, campaign.id)
            campaign_ids = [campaign.id]
        if "source" in req.params:
            source_id = get_source(self.db, req.get_param("source", required=True)).id
        entries = cost_entries(self.db, campaign_ids=campaign_ids, source_id=source_id)
        visible = visible_campaigns(req)
        if visible is not None:  # Theirs, and their campaigns' sources'.
            seen = {e["id"] for e in cost_entries(self.db, campaign_ids=visible)}
            entries = [e for e in entries if e["id"] in seen]
        answer(req, resp, {"items": entries, "next": None})

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        _require_money(req)
        request = _request(req, self.db, read_body(req, COST_SET))
        spread = set_cost(self.db, request, actor=req.context.principal)
        answer(req, resp, dataclasses.asdict(spread))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        _require_money(req)
        items = read_body(req, COST_BATCH)["costs"]
        if not 1 <= len(items) <= MAX_BATCH:
            raise falcon.HTTPBadRequest(
                title="Refused", description=f"Send 1 to {MAX_BATCH} costs in one batch, not {len(items)}."
            )
        requests, errors = [], []
        for index, item in enumerate(items):
            try:
                requests.append(_request(req, self.db, item, f"Cost {index}"))
            except falcon.HTTPError as exc:
                errors.append({"index": index, "status": exc.status_code, "description": exc.description})
        if errors:
            answer(
                req,
                resp,
                {
                    "title": "Refused",
                    "description": f"{len(errors)} of the {len(items)} costs are refused; none was set.",
                    "errors": errors,
                },
                falcon.HTTP_400,
            )
            return
        spreads = [set_cost(self.db, request, actor=req.context.principal) for request in requests]
        answer(req, resp, {"items": [dataclasses.asdict(spread) for spread in spreads]})
