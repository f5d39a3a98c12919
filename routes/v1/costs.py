"""Costs: a spend for a period spread over a campaign's clicks (models/reporting/costs.py, as `lanner cost set`).

A spend may be for the campaign's clicks with one source or sub id value (`dimension` and `value`).
"""

from __future__ import annotations

import dataclasses

import falcon

from models.admin.services import get_campaign
from models.reporting.costs import set_campaign_cost
from routes.v1.auth import require_campaign
from routes.v1.spec import Field, Operation, answer, api_resource, read_body

COST_SET = (
    Field("campaign", "string", "Campaign id or alias.", required=True),
    Field("from", "string", "YYYY-MM-DD or YYYY-MM-DDTHH:MM in `timezone`, inclusive.", required=True),
    Field("to", "string", "YYYY-MM-DD (the whole day) or YYYY-MM-DDTHH:MM, exclusive.", required=True),
    Field("amount", "number", "The total spend for the period.", required=True),
    Field("currency", "string", "The amount's currency (default: the campaign's cost currency)."),
    Field("timezone", "string", "IANA name for from/to (default UTC)."),
    Field("dimension", "string", "Only the clicks with `value` in this: source or sub_id_1 … sub_id_30."),
    Field("value", "string", "The source or sub id value (with `dimension`)."),
)


@api_resource
class CostResource:
    operations = {
        "PUT": Operation(
            "Replace the costs of a campaign's clicks in a period (or of those with one source or sub id value) "
            "with an amount spread evenly over them.",
            body=COST_SET,
        )
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, COST_SET)
        if ("dimension" in body) != ("value" in body):
            raise falcon.HTTPBadRequest(title="Refused", description="Give dimension and value together.")
        where = (body["dimension"], body["value"]) if "dimension" in body else None
        campaign = get_campaign(body["campaign"])
        require_campaign(req, campaign.id)
        principal = req.context.principal
        if principal.hides_money:  # The panel offers them no cost form either.
            raise falcon.HTTPForbidden(
                title="Not allowed", description=f"{principal.name} sees no amounts, so may not set costs."
            )
        spread = set_campaign_cost(
            self.db, campaign.id, body["from"], body["to"], body["amount"],
            cost_currency=campaign.cost_currency, timezone=body.get("timezone", "UTC"),
            currency=body.get("currency"), where=where, actor=principal,
        )  # fmt: skip
        answer(req, resp, dataclasses.asdict(spread))
