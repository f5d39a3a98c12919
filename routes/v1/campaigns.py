"""Campaigns and their streams (filters, offers and weights, evaluation order), over
models/admin/services.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import falcon

from models.accounts.access import editable_campaign_ids
from models.admin import services
from models.admin.landers import get_lander, stream_lander_rows
from models.admin.tags import (
    campaign_tags,
    clean_tags,
    has_tag,
    set_campaign_tags,
    tag_text,
    update_campaign_and_tags,
)
from models.admin.views import campaign_fields
from models.choices import CAMPAIGN_STATUSES, STREAM_TYPES
from routes.v1.auth import require_campaign, require_creator, visible_campaigns
from routes.v1.pagination import page
from routes.v1.spec import PAGE_PARAMS, Field, Operation, Param, answer, api_resource, read_body

CAMPAIGN_OPTIONS = (
    Field("timezone", "string", "IANA timezone for schedules and daily stream caps."),
    Field("bind_visitor", "boolean", "A returning visitor gets the stream and offer they got before."),
    Field("default_action", "string", "When no stream matches: not_found, redirect or blank."),
    Field("default_url", "string", "URL template for the redirect default action."),
    Field("cost_model", "string", "cpc, cpuc, cpm, cpa, cps or revshare."),
    Field("cost_value", "number", "The price per unit of the cost model (revshare: percent)."),
    Field(
        "cost_currency",
        "string",
        "The cost's currency; without an exchange rate it is accepted with a warning (`warnings`).",
    ),
    Field("source", "string", "Its traffic source (name or id): its URL's parameters and its postback."),
)
CAMPAIGN_CREATE = (
    Field("name", "string", required=True),
    Field("alias", "string", "The campaign URL path: /<alias>.", required=True),
    Field("offer_url", "string", "A new offer with this URL template (or offer_id)."),
    Field("offer_id", "integer", "Or send to an existing offer."),
    Field("rotation", "string", "position or weight."),
    Field("uniqueness_hours", "number"),
    *CAMPAIGN_OPTIONS,
)
CAMPAIGN_UPDATE = (
    Field("name", "string"),
    Field("alias", "string"),
    Field("rotation", "string"),
    Field("uniqueness_hours", "number"),
    Field("status", "string", ", ".join(CAMPAIGN_STATUSES)),
    *CAMPAIGN_OPTIONS,
    Field("clear_source", "boolean", "No traffic source any more (its postback target goes too)."),
    Field("new_token", "boolean", "true: a new Click API token (/click_api/v3); the old one stops working."),
    Field("tags", "strings", "Its tags, replacing the old ones ([]: none); case-blind, each once."),
)
CAMPAIGN_TAGS = (Field("tags", "strings", "Its tags, replacing the old ones ([]: none).", required=True),)
STREAM_FIELDS = (
    Field("name", "string"),
    Field("type", "string", "intercepting, regular or fallback."),
    Field("position", "integer", "Evaluation position within its type (default: last)."),
    Field("weight", "integer", "Weight in weighted rotation."),
    Field("action", "string", "offers, redirect, html, campaign, not_found or blank."),
    Field("url", "string", "Target URL template for the redirect action."),
    Field("html", "string", "The page for the html action."),
    Field("target", "string", "Campaign alias for the campaign action."),
    Field("offers", "offers", "The stream's offers with weights; replaces the old ones."),
    Field(
        "landers",
        "landers",
        "The landers its visitors see before the offer, with weights; replaces the old ones ([]: none).",
    ),
    Field(
        "filters",
        "strings",
        "Filters such as country=US,GB or device!=desktop (README); replace the old ones.",
    ),
    Field("filter_mode", "string", "and or or."),
    Field("offer_rotation", "string", "weight, unvisited, bandit_cr or bandit_epc."),
    Field("lander_rotation", "string", "weight, bandit_cr (its LP CTR) or bandit_epc."),
    Field("redirect_type", "string", "http, meta or script."),
    Field("fallback_offer_id", "integer", "Offer used once all are capped."),
    Field("daily_cap", "integer", "Clicks per local day."),
    Field("total_cap", "integer", "Clicks in total."),
)
STREAM_UPDATE = (
    *STREAM_FIELDS,
    Field("status", "string", "active or disabled."),
    Field("clear_filters", "boolean", "Remove every filter."),
    Field("clear_caps", "boolean", "Remove both caps."),
)


class GeoWarnings:
    """A stream's answer with `warnings`: its geo filters the configured geo files cannot answer (as
    `lanner stream add|update` prints them); the stream is saved all the same."""

    def __init__(self, geo_path: Path, geo_network_paths: tuple[Path, ...]) -> None:
        self.geo_path, self.geo_network_paths = geo_path, geo_network_paths

    def with_warnings(self, db, stream) -> dict[str, Any]:
        warnings = services.stream_geo_warnings(stream, self.geo_path, self.geo_network_paths)
        return {**stream_json(db, stream), "warnings": warnings}


def stream_json(db, stream) -> dict[str, Any]:
    return {
        "id": stream.id,
        "campaign_id": stream.campaign_id,
        "name": stream.name,
        "type": stream.type,
        "position": stream.position,
        "weight": stream.weight,
        "action": stream.action,
        "payload": stream.action_payload,
        "status": stream.status,
        "offers": [{"offer_id": o, "weight": w} for o, w in services.stream_offers(db, stream)],
        "landers": stream_lander_rows(db, stream.id),
        "offer_rotation": stream.offer_rotation,
        "lander_rotation": stream.lander_rotation,
        "fallback_offer_id": stream.fallback_offer_id,
        "redirect_type": stream.redirect_type,
        "filters": services.describe_filters(stream),
        "filter_mode": stream.filter_mode,
        "daily_cap": stream.daily_cap,
        "total_cap": stream.total_cap,
    }


def _campaign(db, req: falcon.Request, ref: str):
    campaign = services.get_campaign(db, ref)  # AdminNotFound: 404.
    require_campaign(req, campaign.id)
    return campaign


def _stream(db, req: falcon.Request, stream_id: int):
    stream = services.get_stream(db, stream_id)
    require_campaign(req, stream.campaign_id)
    return stream


def _shown(req: falcon.Request, campaigns: list) -> list[dict[str, Any]]:
    """campaign_fields, with the Click API token only for those who may change the campaign: the token
    records clicks (routes/clickapi.py), a read-only share must not."""
    editable = editable_campaign_ids(req.context.db, req.context.principal)
    tags = campaign_tags(req.context.db, [c.id for c in campaigns])  # One query for the page.
    shown = []
    for campaign in campaigns:
        data = campaign_fields(campaign, tags.get(campaign.id, []))
        if editable is not None and campaign.id not in editable:
            data["token"] = None
        shown.append(data)
    return shown


def _campaign_changes(body: dict[str, Any]) -> dict[str, Any]:
    if "default_url" in body:
        body["default_payload"] = body.pop("default_url")
    return body


def _offers(body: dict[str, Any]) -> list[tuple[int, int]] | None:
    if "offers" not in body:
        return None
    return [(item["offer_id"], item.get("weight", 100)) for item in body.pop("offers")]


def _landers(db, body: dict[str, Any]) -> list[tuple[int, int]] | None:
    """The `landers` sent, as [(lander_id, weight)] (a name for its lander's id); None: not sent."""
    if "landers" not in body:
        return None
    landers = []
    for item in body.pop("landers"):
        lander_id = item["lander_id"] if "lander_id" in item else get_lander(db, item["name"]).id
        landers.append((lander_id, item.get("weight", 100)))
    return landers


def _payload(body: dict[str, Any]) -> str | None:
    given = [body.pop(name) for name in ("url", "html", "target") if name in body]
    if len(given) > 1:
        raise falcon.HTTPBadRequest(title="Refused", description="Give only one of url, html and target.")
    return given[0] if given else None


@api_resource
class CampaignListResource:
    operations = {
        "GET": Operation(
            "Campaigns, by id.",
            params=(
                Param("all", "true: archived ones too.", "boolean"),
                Param("tag", "Only campaigns with this tag (case-blind)."),
                *PAGE_PARAMS,
            ),
            paginated=True,
        ),
        "POST": Operation(
            "Create a campaign with one stream to one offer.", body=CAMPAIGN_CREATE, answers={201: "Created."}
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        include_archived = req.get_param_as_bool("all", default=False)
        campaigns = services.list_campaigns(self.db, include_archived=include_archived)
        visible = visible_campaigns(req)
        if visible is not None:
            campaigns = [c for c in campaigns if c.id in visible]
        tag = tag_text(req.get_param("tag"))
        if tag:
            tags = campaign_tags(self.db, [c.id for c in campaigns])
            campaigns = [c for c in campaigns if has_tag(tags.get(c.id, []), tag)]
        items, following = page(req, campaigns, lambda c: [c.id])
        answer(req, resp, {"items": _shown(req, items), "next": following})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = _campaign_changes(read_body(req, CAMPAIGN_CREATE))
        require_creator(req, "campaigns")
        actor = req.context.principal
        campaign = services.create_campaign(self.db, body.pop("name"), body.pop("alias"), actor=actor, **body)
        warnings = services.rate_warnings(self.db, campaign.cost_currency)
        answer(req, resp, {**campaign_fields(campaign), "warnings": warnings}, falcon.HTTP_201)


@api_resource
class CampaignResource:
    operations = {
        "GET": Operation("A campaign (by id or alias) with its streams in evaluation order."),
        "PATCH": Operation("Change a campaign; fields left out stay.", body=CAMPAIGN_UPDATE),
        "DELETE": Operation("Archive a campaign (its clicks and reports stay)."),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        campaign = _campaign(self.db, req, ref)
        (data,) = _shown(req, [campaign])
        data["streams"] = [stream_json(self.db, s) for s in services.list_streams(self.db, campaign.id)]
        answer(req, resp, data)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = _campaign_changes(read_body(req, CAMPAIGN_UPDATE))
        campaign = _campaign(self.db, req, ref)
        # Checked before any change, so a bad tag leaves the other fields as they were too.
        tags = clean_tags(body.pop("tags")) if "tags" in body else None
        updated = update_campaign_and_tags(self.db, campaign.id, tags, actor=req.context.principal, **body)
        shown = campaign_fields(updated)
        if "cost_currency" in body:  # Accepted without a rate, but told.
            shown["warnings"] = services.rate_warnings(self.db, updated.cost_currency)
        answer(req, resp, shown)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        campaign = _campaign(self.db, req, ref)
        answer(
            req,
            resp,
            campaign_fields(services.archive_campaign(self.db, campaign.id, actor=req.context.principal)),
        )


@api_resource
class CampaignTagsResource:
    operations = {
        "GET": Operation("A campaign's tags, A to Z."),
        "PUT": Operation(
            "Set a campaign's tags (case-blind, each once; [] takes them all off).", body=CAMPAIGN_TAGS
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        campaign = _campaign(self.db, req, ref)
        answer(req, resp, {"tags": campaign_tags(self.db, [campaign.id]).get(campaign.id, [])})

    def on_put(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, CAMPAIGN_TAGS)
        campaign = _campaign(self.db, req, ref)
        set_campaign_tags(self.db, campaign, clean_tags(body["tags"]), actor=req.context.principal)
        answer(req, resp, {"tags": campaign_tags(self.db, [campaign.id]).get(campaign.id, [])})


CAMPAIGN_CLONE = (
    Field("name", "string", 'The copy\'s name (default: "<name> (copy)").'),
    Field("alias", "string", "The copy's alias (default: <alias>-copy, numbered until free)."),
)


@api_resource
class CampaignCloneResource:
    operations = {
        "POST": Operation(
            "Copy a campaign with its streams, filters and offer weights.",
            body=CAMPAIGN_CLONE,
            answers={201: "Created."},
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_post(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, CAMPAIGN_CLONE)
        campaign = _campaign(self.db, req, ref)
        require_creator(req, "campaigns")
        copy = services.clone_campaign(self.db, campaign.id, actor=req.context.principal, **body)
        answer(req, resp, campaign_fields(copy), falcon.HTTP_201)


def _evaluation_key(stream) -> list:
    return [STREAM_TYPES.index(stream.type), stream.position, stream.id]


@api_resource
class StreamListResource:
    operations = {
        "GET": Operation("A campaign's streams in evaluation order.", params=PAGE_PARAMS, paginated=True),
        "POST": Operation("Add a stream to a campaign.", body=STREAM_FIELDS, answers={201: "Created."}),
    }

    def __init__(self, auth, db, geo: GeoWarnings) -> None:
        self.auth, self.db, self.geo = auth, db, geo

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        campaign = _campaign(self.db, req, ref)
        items, following = page(req, services.list_streams(self.db, campaign.id), _evaluation_key)
        answer(req, resp, {"items": [stream_json(self.db, s) for s in items], "next": following})

    def on_post(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, STREAM_FIELDS)
        campaign = _campaign(self.db, req, ref)
        offers, landers, payload = _offers(body) or [], _landers(self.db, body) or [], _payload(body)
        stream = services.add_stream(
            self.db,
            campaign.id,
            offers=offers,
            landers=landers,
            payload=payload or "",
            actor=req.context.principal,
            **body,
        )
        answer(req, resp, self.geo.with_warnings(self.db, stream), falcon.HTTP_201)


@api_resource
class StreamOrderResource:
    operations = {
        "PUT": Operation(
            "Reorder a campaign's streams: positions 1, 2, ... within each type, in the order given.",
            body=(Field("streams", "integers", "Every active or disabled stream id of the campaign.", True),),
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_put(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, self.operations["PUT"].body)
        campaign = _campaign(self.db, req, ref)
        streams = services.reorder_streams(self.db, campaign.id, body["streams"], actor=req.context.principal)
        answer(req, resp, {"items": [stream_json(self.db, s) for s in streams], "next": None})


@api_resource
class StreamResource:
    operations = {
        "GET": Operation("A stream."),
        "PATCH": Operation("Change a stream in place; fields left out stay.", body=STREAM_UPDATE),
        "DELETE": Operation("Remove a stream (its clicks keep pointing at it)."),
    }

    def __init__(self, auth, db, geo: GeoWarnings) -> None:
        self.auth, self.db, self.geo = auth, db, geo

    def on_get(self, req: falcon.Request, resp: falcon.Response, stream_id: int) -> None:
        answer(req, resp, stream_json(self.db, _stream(self.db, req, stream_id)))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, stream_id: int) -> None:
        body = read_body(req, STREAM_UPDATE)
        _stream(self.db, req, stream_id)
        if body.get("status") == "deleted":
            raise falcon.HTTPBadRequest(title="Refused", description="Remove a stream with DELETE.")
        offers, payload = _offers(body), _payload(body)
        if offers == []:
            raise falcon.HTTPBadRequest(
                title="Refused", description="A stream's offers cannot be an empty list."
            )
        stream = services.update_stream(
            self.db,
            stream_id,
            offers=offers,
            landers=_landers(self.db, body),
            payload=payload,
            actor=req.context.principal,
            **body,
        )
        shown = self.geo.with_warnings(self.db, stream) if "filters" in body else stream_json(self.db, stream)
        answer(req, resp, shown)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, stream_id: int) -> None:
        _stream(self.db, req, stream_id)
        removed = services.remove_stream(self.db, stream_id, actor=req.context.principal)
        answer(req, resp, stream_json(self.db, removed))
