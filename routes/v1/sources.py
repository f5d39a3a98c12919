"""Traffic sources: parameter templates, sub_id mappings and postback templates, over
models/admin/sources.py, and the bundled catalogue to start one from."""

from __future__ import annotations

from typing import Any

import falcon

from models.accounts.access import creates_campaigns
from models.admin import sources
from models.choices import SOURCE_STATUSES
from models.routing.sources import SourceError, parse_slots
from routes.v1.auth import require_creator
from routes.v1.pagination import page
from routes.v1.spec import PAGE_PARAMS, Field, Operation, Param, answer, api_resource, read_body

SOURCE_FIELDS = (
    Field("template", "string", "The campaign URL's parameters: zoneid={zoneid}&external_id={clickid}."),
    Field("slots", "strings", "Sub id slots for names, e.g. zoneid=3 (default: the next free slot)."),
    Field("postback_url", "string", "Outbound postback template ({external_id}, {payout}, {zoneid}, ...)."),
    Field("postback_statuses", "strings", "The conversion statuses its postback is sent for (default sale)."),
    Field("postback_method", "string", "GET or POST."),
)
SOURCE_CREATE = (
    Field("name", "string", required=True),
    Field("catalogue", "string", "Start from this catalogue entry (GET /sources/catalogue)."),
    *SOURCE_FIELDS,
)
SOURCE_UPDATE = (
    Field("name", "string"),
    *SOURCE_FIELDS,
    Field("status", "string", ", ".join(SOURCE_STATUSES)),
)


def _slots(body: dict[str, Any]) -> dict[str, int] | None:
    if "slots" not in body:
        return None
    try:
        return parse_slots(body.pop("slots"))
    except SourceError as exc:
        raise falcon.HTTPBadRequest(title="Refused", description=str(exc)) from None


@api_resource
class SourceListResource:
    operations = {
        "GET": Operation(
            "Traffic sources, by id, with how many campaigns use each.",
            params=(Param("all", "true: archived ones too.", "boolean"), *PAGE_PARAMS),
            paginated=True,
        ),
        "POST": Operation("Create a traffic source.", body=SOURCE_CREATE, answers={201: "Created."}),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = sources.list_sources(self.db, include_archived=req.get_param_as_bool("all", default=False))
        counts = sources.campaign_counts(self.db)
        items, following = page(req, found, lambda s: [s.id])
        reveal = creates_campaigns(req.context.principal)
        shown = [sources.source_fields(s, counts.get(s.id, 0), reveal=reveal) for s in items]
        answer(req, resp, {"items": shown, "next": following})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, SOURCE_CREATE)
        require_creator(req, "traffic sources")
        slots = _slots(body)
        source = sources.create_source(
            self.db,
            body.pop("name"),
            body.pop("template", ""),
            slots=slots,
            from_catalogue=body.pop("catalogue", None),
            actor=req.context.principal,
            **body,
        )
        answer(req, resp, sources.source_fields(source, 0), falcon.HTTP_201)


@api_resource
class SourceResource:
    operations = {
        "GET": Operation("A traffic source (by id or name)."),
        "PATCH": Operation(
            "Change a traffic source; fields left out stay (slots alone re-map the current template).",
            body=SOURCE_UPDATE,
        ),
        "DELETE": Operation("Delete a traffic source no campaign uses (409 naming them otherwise)."),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        source = sources.get_source(self.db, ref)
        count = sources.campaign_counts(self.db).get(source.id, 0)
        reveal = creates_campaigns(req.context.principal)
        answer(req, resp, sources.source_fields(source, count, reveal=reveal))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, SOURCE_UPDATE)
        sources.get_source(self.db, ref)
        require_creator(req, "or change traffic sources")
        slots = _slots(body)
        source = sources.update_source(self.db, ref, slots=slots, actor=req.context.principal, **body)
        answer(req, resp, sources.source_fields(source, sources.campaign_counts(self.db).get(source.id, 0)))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        source = sources.get_source(self.db, ref)
        require_creator(req, "or delete traffic sources")
        sources.delete_source(self.db, source.id, actor=req.context.principal)
        answer(req, resp, {"deleted": source.id, "name": source.name})


@api_resource
class SourceCatalogueResource:
    operations = {
        "GET": Operation("The bundled catalogue of common traffic sources: starting points to check."),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        catalogue = sources.catalogue()
        answer(req, resp, {"about": catalogue["about"], "items": catalogue["sources"], "next": None})
