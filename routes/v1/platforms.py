"""Ad platform connections (Meta, TikTok, Google Ads conversion APIs), over
models/conversions/platforms/connections.py. Admins only: a connection holds the install's ad account
credentials, which every answer shows masked to their last 4 characters."""

from __future__ import annotations

import falcon

from models.choices import CONNECTION_STATUSES, PLATFORMS
from models.conversions.platforms import connections
from models.conversions.platforms.sending import PlatformConfig
from routes.v1.auth import require_admin
from routes.v1.pagination import page
from routes.v1.spec import PAGE_PARAMS, Field, Operation, Param, answer, api_resource, check_params, read_body

CHANGES = (
    Field(
        "credentials",
        "labels",
        "meta: pixel_id, access_token; tiktok: pixel_code, access_token; google_ads: customer_id, "
        "conversion_action, developer_token, oauth_token, login_customer_id ('' removes an optional one).",
    ),
    Field("events", "labels", "Conversion status (lead, sale, rebill) → the platform's event name."),
    Field("test_event_code", "string", "Meta's or TikTok's test event code; '' sends live events."),
)
CONNECTION_CREATE = (
    Field("name", "string", required=True),
    Field("platform", "string", ", ".join(PLATFORMS), required=True),
    Field("campaign", "string", "The campaign (id or alias) whose conversions it sends; or"),
    Field("source", "string", "the traffic source (name or id): every campaign of it."),
    *CHANGES,
)
CONNECTION_UPDATE = (
    *CHANGES,
    Field("status", "string", f"{' or '.join(CONNECTION_STATUSES)}: pause or resume."),
)
LOG_PARAMS = (
    Param("state", "pending, sent, failed or expired."),
    Param("limit", "Events, newest first, 1 to 1000 (default 100).", "integer"),
)


def _admin(req: falcon.Request) -> None:
    require_admin(req, "ad platform connections")


@api_resource
class ConnectionListResource:
    operations = {
        "GET": Operation(
            "Ad platform connections, by id, credentials masked (admins).", params=PAGE_PARAMS, paginated=True
        ),
        "POST": Operation(
            "Create a connection for a campaign or a traffic source (admins).",
            body=CONNECTION_CREATE,
            answers={201: "Created."},
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _admin(req)
        items, following = page(req, connections.list_connections(self.db), lambda c: [c.id])
        answer(req, resp, {"items": [c.fields() for c in items], "next": following})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, CONNECTION_CREATE)
        _admin(req)
        view = connections.create_connection(
            self.db,
            body["name"],
            body["platform"],
            campaign=body.get("campaign"),
            source=body.get("source"),
            credentials=body.get("credentials", {}),
            events=body.get("events"),
            test_event_code=body.get("test_event_code", ""),
            actor=req.context.principal,
        )
        answer(req, resp, view.fields(), falcon.HTTP_201)


@api_resource
class ConnectionResource:
    operations = {
        "GET": Operation("A connection (by name or id), credentials masked (admins)."),
        "DELETE": Operation("Remove it for good: its queued events fail; it stays with its log (admins)."),
        "PATCH": Operation(
            "Change its credentials, events or test code, or pause / resume it (admins).",
            body=CONNECTION_UPDATE,
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        _admin(req)
        answer(req, resp, connections.get_connection(self.db, ref).fields())

    def on_delete(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        _admin(req)
        answer(req, resp, connections.remove_connection(self.db, ref, actor=req.context.principal).fields())

    def on_patch(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, CONNECTION_UPDATE)
        _admin(req)
        actor = req.context.principal
        view = connections.get_connection(self.db, ref)
        if body.get("status", "active") not in CONNECTION_STATUSES:  # Refused before anything changes.
            raise falcon.HTTPBadRequest(
                title="Refused",
                description=f"A connection's status is one of {', '.join(CONNECTION_STATUSES)}.",
            )
        if {"credentials", "events", "test_event_code"} & set(body):
            view = connections.change_connection(
                self.db,
                ref,
                credentials=body.get("credentials"),
                events=body.get("events"),
                test_event_code=body.get("test_event_code"),
                actor=actor,
            )
        if "status" in body:
            view = connections.set_connection_status(self.db, ref, body["status"], actor=actor)
        answer(req, resp, view.fields())


@api_resource
class ConnectionTestResource:
    operations = {
        "POST": Operation(
            "Send one made-up event now; `accepted` and the platform's answer (admins).",
        )
    }

    def __init__(self, auth, db, config: PlatformConfig) -> None:
        self.auth, self.db, self.config = auth, db, config

    def on_post(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        _admin(req)
        result = connections.test_connection(self.db, ref, self.config)
        answer(req, resp, {"accepted": result.ok, "answer": result.text})


@api_resource
class ConnectionLogResource:
    operations = {
        "GET": Operation(
            "Its events, newest first: state, attempts, the platform's last answer.", params=LOG_PARAMS
        )
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        _admin(req)
        given = check_params(req, LOG_PARAMS)
        state = given.get("state")
        if state is not None and state not in ("pending", "sent", "failed", "expired"):
            raise falcon.HTTPBadRequest(
                title="Refused", description="state is pending, sent, failed or expired."
            )
        limit_text = given.get("limit", "100")
        if not limit_text.isascii() or not limit_text.isdigit() or not 1 <= int(limit_text) <= 1000:
            raise falcon.HTTPBadRequest(
                title="Refused", description="limit is a whole number from 1 to 1000."
            )
        rows = connections.connection_log(self.db, ref, state=state, limit=int(limit_text))
        answer(req, resp, {"items": rows})
