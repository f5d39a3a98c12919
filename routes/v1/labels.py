"""Labels: sub id values (zones ...) whitelisted or blacklisted per campaign or traffic source
(models/optimisation/labels.py, as `lanner label`), and their lists in the formats sources take.

A label of a traffic source's values counts for all its campaigns: setting or removing one needs the
right to change every one of them, as a source's cost does.
"""

from __future__ import annotations

import falcon

from models.accounts.access import uneditable_campaigns
from models.admin.rows import get_campaign
from models.optimisation.labels import (
    EXPORT_FORMATS,
    LABELS,
    LabelScope,
    export_labels,
    list_labels,
    remove_labels,
    scope_of,
    set_labels,
)
from models.optimisation.sourcepause import SourceAccess, push_blacklist
from models.tables.campaign import Campaign
from routes.v1.auth import require_campaign, visible_campaigns
from routes.v1.spec import Field, Operation, Param, answer, api_resource, read_body

SCOPE_FIELDS = (
    Field("campaign", "string", "Campaign id or alias: its own labels (or give `source`)."),
    Field("source", "string", "Traffic source id or name: labels for all its campaigns."),
    Field("param", "string", "The source's parameter name (zoneid) or sub_id_1 … sub_id_30.", required=True),
    Field("values", "strings", "The values, at most 10,000.", required=True),
)
LABEL_SET = (*SCOPE_FIELDS, Field("label", "string", " or ".join(LABELS), required=True))
PUSH_FIELDS = SCOPE_FIELDS[:3]
SCOPE_PARAMS = (
    Param("campaign", "Campaign id or alias (or give source)."),
    Param("source", "Traffic source id or name."),
    Param("param", "The source's parameter name (zoneid) or sub_id_N."),
)


def _scope(req: falcon.Request, db, campaign: str | None, source: str | None, parameter: str) -> LabelScope:
    """The scope, after the principal's right to it is checked (to see it; to change it for a write)."""
    scope = scope_of(db, campaign, source, parameter)
    if scope.scope == "campaign":
        require_campaign(req, scope.scope_id)
        return scope
    ids = [c.id for c in Campaign.select(Campaign.id).where(Campaign.source_id == scope.scope_id)]
    principal = req.context.principal
    visible = visible_campaigns(req)
    if visible is not None and not set(ids) & visible:
        raise falcon.HTTPNotFound(title="Not found", description=f"There is no traffic source {source!r}.")
    others = uneditable_campaigns(db, principal, ids) if req.method != "GET" else []
    if others:
        raise falcon.HTTPForbidden(
            title="Not allowed",
            description=f"{principal.name} may not change campaign {others[0]} of traffic source "
            f"{scope.name!r}, so may not change the source's labels.",
        )
    return scope


@api_resource
class LabelListResource:
    operations = {
        "GET": Operation(
            "The labels, by scope, parameter and value.",
            params=(
                Param("campaign", "Only this campaign's own labels and its traffic source's."),
                Param("label", " or ".join(LABELS)),
            ),
        ),
        "PUT": Operation("Label values (a value labelled otherwise is relabelled).", body=LABEL_SET),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        visible = visible_campaigns(req)
        ids = None if visible is None else sorted(visible)
        if "campaign" in req.params:
            campaign = get_campaign(self.db, req.get_param("campaign", required=True))
            require_campaign(req, campaign.id)
            ids = [campaign.id]
        items = list_labels(self.db, campaign_ids=ids, label=req.get_param("label"))
        answer(req, resp, {"items": items, "next": None})

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, LABEL_SET)
        scope = _scope(req, self.db, body.get("campaign"), body.get("source"), body["param"])
        changed = set_labels(self.db, scope, body["values"], body["label"], actor=req.context.principal)
        answer(req, resp, {"changed": changed, "scope": scope.scope, "slot": scope.slot_name})


@api_resource
class LabelRemoveResource:
    operations = {
        "POST": Operation("Take the labels off values (404 if none of them has one).", body=SCOPE_FIELDS)
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, SCOPE_FIELDS)
        scope = _scope(req, self.db, body.get("campaign"), body.get("source"), body["param"])
        removed = remove_labels(self.db, scope, body["values"], actor=req.context.principal)
        answer(req, resp, {"removed": removed})


@api_resource
class LabelExportResource:
    operations = {
        "GET": Operation(
            "The values labelled so, as a source's black or white list takes them: plain (one a line), "
            "comma (one line) or csv (with a header); text, not JSON.",
            params=(
                *SCOPE_PARAMS,
                Param("label", f"{' or '.join(LABELS)} (default blacklist)."),
                Param("format", f"{', '.join(EXPORT_FORMATS)} (default plain)."),
            ),
        )
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        parameter = req.get_param("param")
        if not parameter:
            raise falcon.HTTPBadRequest(title="Refused", description="Give param (zoneid, or sub_id_N).")
        scope = _scope(req, self.db, req.get_param("campaign"), req.get_param("source"), parameter)
        fmt = req.get_param("format") or "plain"
        resp.text = export_labels(self.db, scope, req.get_param("label") or "blacklist", fmt)
        resp.content_type = "text/csv; charset=utf-8" if fmt == "csv" else "text/plain; charset=utf-8"


@api_resource
class LabelPushResource:
    operations = {
        "POST": Operation(
            "Send the scope's blacklist to its traffic source: its zones excluded in the platform campaigns "
            "the source's PropellerAds spend connection maps (409 with the source's answer if it refuses, or "
            "if no connection maps any).",
            body=PUSH_FIELDS,
        )
    }

    def __init__(self, auth, db, sources: SourceAccess) -> None:
        self.auth, self.db, self.sources = auth, db, sources

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, PUSH_FIELDS)
        scope = _scope(req, self.db, body.get("campaign"), body.get("source"), body["param"])
        pushed = push_blacklist(scope, self.sources)
        answer(
            req,
            resp,
            {"zones": pushed.zones, "not_zone_ids": pushed.not_zone_ids, "campaigns": pushed.campaigns},
        )
