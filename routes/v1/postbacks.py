"""Postback set-up (outbound targets, status maps) and the postback and delivery logs, over
models/conversions/admin.py and models/reporting/conversionlog.py."""

from __future__ import annotations

import falcon

from models.admin.services import get_campaign
from models.choices import POSTBACK_VERDICTS
from models.conversions import admin
from models.reporting.conversionlog import LogFilter, list_deliveries, list_postbacks
from routes.v1.auth import require_admin, require_campaign, visible_campaigns
from routes.v1.logs import CAMPAIGN_PARAM, LOG_PARAMS, campaign_id, log_options
from routes.v1.pagination import log_page, page
from routes.v1.spec import PAGE_PARAMS, Field, Operation, Param, answer, api_resource, check_params, read_body

TARGET_CREATE = (
    Field("campaign", "string", "Campaign id or alias.", required=True),
    Field("url", "string", "The traffic source's postback URL, with macros.", required=True),
    Field("statuses", "strings", "The statuses it is sent for: lead, sale, rejected, rebill, trash.", True),
    Field("method", "string", "GET (default) or POST."),
)
STATUS_MAP_SET = (
    Field("word", "string", "The network's status word.", required=True),
    Field("status", "string", "lead, sale, rejected, rebill or trash.", required=True),
    Field("network", "string", "Only for postbacks with this from=; default every network."),
)


@api_resource
class TargetListResource:
    operations = {
        "GET": Operation(
            "Active outbound postback targets, by id.", params=(CAMPAIGN_PARAM, *PAGE_PARAMS), paginated=True
        ),
        "POST": Operation(
            "Add an outbound postback target to a campaign.", body=TARGET_CREATE, answers={201: "Created."}
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        given = check_params(req, self.operations["GET"].params)
        ref = given.get("campaign")
        if ref is not None:
            require_campaign(req, get_campaign(self.db, ref).id)
        targets = admin.list_targets(self.db, ref)
        visible = visible_campaigns(req)
        if visible is not None:
            targets = [t for t in targets if t["campaign_id"] in visible]
        items, following = page(req, targets, lambda t: [t["id"]])
        answer(req, resp, {"items": items, "next": following})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, TARGET_CREATE)
        require_campaign(req, get_campaign(self.db, body["campaign"]).id)
        target = admin.add_target(
            self.db,
            body["campaign"],
            body["url"],
            body["statuses"],
            method=body.get("method", "GET"),
            actor=req.context.principal,
        )
        answer(req, resp, target.__data__, falcon.HTTP_201)


@api_resource
class TargetResource:
    operations = {"DELETE": Operation("Stop sending to a target (its delivery history stays).")}

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_delete(self, req: falcon.Request, resp: falcon.Response, target_id: int) -> None:
        targets = {t["id"]: t for t in admin.list_targets(self.db)}
        if target_id in targets:
            require_campaign(req, targets[target_id]["campaign_id"])
        answer(req, resp, admin.remove_target(self.db, target_id, actor=req.context.principal).__data__)


@api_resource
class StatusMapListResource:
    operations = {
        "GET": Operation(
            "Status maps: a network's word and the status it means.", params=PAGE_PARAMS, paginated=True
        ),
        "PUT": Operation(
            "Map a network's word to a status; stored conversions with that word unmapped take it now.",
            body=STATUS_MAP_SET,
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        maps = admin.list_status_maps(self.db)
        items, following = page(req, maps, lambda m: [m["network"], m["raw_status"]])
        answer(req, resp, {"items": items, "next": following})

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, STATUS_MAP_SET)
        require_admin(req, "status maps")
        remapped = admin.map_status(
            self.db,
            body["word"],
            body["status"],
            network=body.get("network", ""),
            actor=req.context.principal,
        )
        answer(
            req,
            resp,
            {
                "network": body.get("network", "").strip().lower(),
                "raw_status": body["word"].strip().lower(),
                "status": body["status"].strip().lower(),
                "remapped": remapped,
            },
        )


@api_resource
class StatusMapResource:
    operations = {
        "DELETE": Operation(
            "Remove a status map.",
            params=(Param("network", "The map's network (default: every network's)."),),
        )
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_delete(self, req: falcon.Request, resp: falcon.Response, word: str) -> None:
        given = check_params(req, self.operations["DELETE"].params)
        require_admin(req, "status maps")
        admin.unmap_status(self.db, word, network=given.get("network", ""), actor=req.context.principal)
        answer(req, resp, {"removed": word.strip().lower(), "network": given.get("network", "")})


POSTBACK_LOG_PARAMS = (
    Param("subid"),
    Param("verdict", ", ".join(POSTBACK_VERDICTS)),
    Param("orphans", "true: only parked postbacks, still waiting for their click.", "boolean"),
    *LOG_PARAMS,
)


def refuse_raw_money(req: falcon.Request, log: str) -> None:
    """The postback logs keep requests and URLs as sent, payouts in them under any parameter name a
    network uses: no field can be dropped from them, so a user who hides money does not get them."""
    if req.context.principal.hides_money:
        raise falcon.HTTPForbidden(
            title="Money hidden",
            description=f"The {log} shows payouts as the networks send them, which this user does not see.",
        )


@api_resource
class PostbackLogResource:
    operations = {
        "GET": Operation(
            "Incoming postbacks as received, with their verdicts, newest first.",
            params=POSTBACK_LOG_PARAMS,
            paginated=True,
        )
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        given = check_params(req, POSTBACK_LOG_PARAMS)
        if visible_campaigns(req) is not None:  # The log holds postbacks for no campaign yet (parked).
            raise falcon.HTTPForbidden(title="Admins only", description="The postback log is for admins.")
        refuse_raw_money(req, "postback log")
        orphans = req.get_param_as_bool("orphans", default=False)
        options = log_options(req, given)
        query = LogFilter(subid=given.get("subid"), status=given.get("verdict"), **options)
        items, following = log_page(list_postbacks(self.db, query, orphans=orphans), options["limit"] - 1)
        answer(req, resp, {"items": items, "next": following})


DELIVERY_LOG_PARAMS = (CAMPAIGN_PARAM, Param("state", "pending, sent or failed."), *LOG_PARAMS)


@api_resource
class DeliveryLogResource:
    operations = {
        "GET": Operation(
            "Outbound postbacks, newest first, with their state and the last answer.",
            params=DELIVERY_LOG_PARAMS,
            paginated=True,
        )
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        given = check_params(req, DELIVERY_LOG_PARAMS)
        refuse_raw_money(req, "delivery log")
        chosen = campaign_id(self.db, req, given)
        options = log_options(req, given)
        query = LogFilter(campaign_id=chosen, status=given.get("state"), **options)
        items, following = log_page(list_deliveries(self.db, query), options["limit"] - 1)
        answer(req, resp, {"items": items, "next": following})
