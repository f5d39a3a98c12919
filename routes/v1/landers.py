"""Landers: remote URL templates and local zips, over models/admin/landers.py. Who sees and changes
which is models/accounts/access.py's (an admin every one; a buyer those they own, and sees those their
campaigns' streams send to)."""

from __future__ import annotations

import falcon

from models.accounts.access import edits_lander, visible_campaign_ids, visible_lander, visible_lander_ids
from models.admin import landers
from routes.v1.auth import require_creator
from routes.v1.pagination import page
from routes.v1.spec import PAGE_PARAMS, Field, Operation, Param, answer, api_resource, read_body, read_raw

LANDER_CREATE = (
    Field("name", "string", required=True),
    Field(
        "url",
        "string",
        "A remote lander's URL template: the click's macros and {offer}; none: a local "
        "lander, waiting for its zip (POST /landers/{ref}/zip).",
    ),
    Field("notes", "string"),
)
LANDER_UPDATE = (
    Field("name", "string"),
    Field("url", "string", "A new URL: the lander becomes remote."),
    Field("notes", "string"),
    Field("status", "string", ", ".join(landers.LANDER_STATUSES)),
)


def lander_answer(req: falcon.Request, db, lander) -> dict:
    """A lander with the streams sending to it of the campaigns the caller sees."""
    uses = landers.lander_uses(db, visible_campaign_ids(db, req.context.principal))
    return landers.lander_fields(lander, uses.get(lander.id, []))


def require_editor(req: falcon.Request, lander) -> None:
    if not edits_lander(req.context.principal, lander):
        raise falcon.HTTPForbidden(
            title="Not allowed",
            description=f"{req.context.principal.name} may not change lander {lander.name!r}.",
        )


@api_resource
class LanderListResource:
    operations = {
        "GET": Operation(
            "Landers, by id, with the streams sending to each (for a buyer: theirs and their campaigns').",
            params=(Param("all", "true: archived ones too.", "boolean"), *PAGE_PARAMS),
            paginated=True,
        ),
        "POST": Operation(
            "Create a lander: remote with its URL, or local without one (then POST its zip).",
            body=LANDER_CREATE,
            answers={201: "Created."},
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found = landers.list_landers(self.db, include_archived=req.get_param_as_bool("all", default=False))
        visible = visible_lander_ids(self.db, req.context.principal)
        found = [lander for lander in found if visible is None or lander.id in visible]
        uses = landers.lander_uses(self.db, visible_campaign_ids(self.db, req.context.principal))
        items, following = page(req, found, lambda x: [x.id])
        answer(
            req,
            resp,
            {"items": [landers.lander_fields(x, uses.get(x.id, [])) for x in items], "next": following},
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, LANDER_CREATE)
        require_creator(req, "landers")
        created = landers.create_lander(
            self.db,
            body["name"],
            url=body.get("url"),
            notes=body.get("notes", ""),
            actor=req.context.principal,
        )
        answer(req, resp, lander_answer(req, self.db, created), falcon.HTTP_201)


@api_resource
class LanderResource:
    operations = {
        "GET": Operation("A lander (by name or id) with the streams sending to it."),
        "PATCH": Operation(
            "Change a lander; fields left out stay (archive: status archived).", body=LANDER_UPDATE
        ),
        "DELETE": Operation("Delete a lander and its files (409 while a stream sends to it, naming them)."),
    }

    def __init__(self, auth, db, files: landers.LanderFiles) -> None:
        self.auth, self.db, self.files = auth, db, files

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        answer(req, resp, lander_answer(req, self.db, visible_lander(self.db, req.context.principal, ref)))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, LANDER_UPDATE)
        lander = visible_lander(self.db, req.context.principal, ref)
        require_editor(req, lander)
        changed = landers.update_lander(
            self.db, lander.id, files=self.files, actor=req.context.principal, **body
        )
        answer(req, resp, lander_answer(req, self.db, changed))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        lander = visible_lander(self.db, req.context.principal, ref)
        require_editor(req, lander)
        deleted = landers.delete_lander(self.db, lander.id, files=self.files, actor=req.context.principal)
        answer(req, resp, landers.lander_fields(deleted))


def read_zip(req: falcon.Request, max_bytes: int) -> bytes:
    """The zip sent as the body (application/zip), refused past `max_bytes` before it is read whole."""
    kind = (req.content_type or "").split(";")[0].strip().lower()
    if kind not in ("application/zip", "application/x-zip-compressed", "application/octet-stream"):
        raise falcon.HTTPUnsupportedMediaType(
            title="Not a zip",
            description="Send the lander's zip as the body, with Content-Type: application/zip.",
        )
    data = read_raw(req, max_bytes, "A lander's zip (LANNER_LANDER_MAX_BYTES)")
    if not data:
        raise falcon.HTTPBadRequest(title="No zip", description="The body is empty; send the lander's zip.")
    return data


@api_resource
class LanderZipResource:
    operations = {
        "POST": Operation(
            "Upload a lander's zip (the raw body, Content-Type: application/zip): it becomes local, its "
            "files swapped in at once; index.html at the root or in one top-level folder.",
            body_type="zip",
        ),
    }

    def __init__(self, auth, db, files: landers.LanderFiles) -> None:
        self.auth, self.db, self.files = auth, db, files

    def on_post(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        lander = visible_lander(self.db, req.context.principal, ref)
        require_editor(req, lander)
        data = read_zip(req, self.files.max_bytes)
        changed = landers.update_lander(
            self.db, lander.id, zip_data=data, files=self.files, actor=req.context.principal
        )
        answer(req, resp, lander_answer(req, self.db, changed))
