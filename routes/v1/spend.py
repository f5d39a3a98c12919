"""Spend connections (spend pulled from Meta, PropellerAds and TikTok into costs), over
models/reporting/spend/connections.py. Admins only: a connection holds the install's ad account
credentials, which every answer shows masked to their last 4 characters.

PERF: `POST .../sync` runs the sync in the request, as `lanner platform spend sync` does: a window of an
account's spend is seconds (50,000 zone-day rows well under a minute: docs/platforms.md).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

import falcon

from models.choices import CONNECTION_STATUSES, SPEND_PLATFORMS
from models.reporting.spend import connections
from models.store.database import write_tx
from routes.v1.auth import require_admin
from routes.v1.pagination import page
from routes.v1.spec import PAGE_PARAMS, Field, Operation, Param, answer, api_resource, check_params, read_body

CHANGES = (
    Field(
        "credentials",
        "labels",
        "meta: ad_account_id, access_token, level (ad, adset); tiktok: advertiser_id, access_token, level "
        "(ad, adgroup); propellerads: api_token ('' removes an optional one).",
    ),
    Field("parameter", "string", "The click parameter holding a row's ad or zone id; '' costs per campaign."),
    Field("currency", "string", "The spend's currency when the platform does not say it."),
    Field("timezone", "string", "The ad account's IANA timezone: its days are days there (default UTC)."),
    Field(
        "mappings",
        "labels",
        "The platform's campaign, ad set or ad id → a campaign (alias or id); '' unmaps.",
    ),
)
SPEND_CREATE = (
    Field("name", "string", required=True),
    Field("platform", "string", ", ".join(SPEND_PLATFORMS), required=True),
    Field("source", "string", "The traffic source (name or id) whose campaigns it costs.", required=True),
    *CHANGES,
)
SPEND_UPDATE = (*CHANGES, Field("status", "string", f"{' or '.join(CONNECTION_STATUSES)}: pause or resume."))
LOG_PARAMS = (Param("limit", "Runs, newest first, 1 to 1000 (default 20).", "integer"),)

logger = logging.getLogger(__name__)


def _admin(req: falcon.Request) -> None:
    require_admin(req, "spend connections")


@api_resource
class SpendListResource:
    operations = {
        "GET": Operation(
            "Spend connections, by id, credentials masked, with their last sync (admins).",
            params=PAGE_PARAMS,
            paginated=True,
        ),
        "POST": Operation(
            "Create a spend connection for a traffic source (admins).",
            body=SPEND_CREATE,
            answers={201: "Created."},
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _admin(req)
        items, following = page(req, connections.list_spend_connections(self.db), lambda c: [c.id])
        answer(req, resp, {"items": [c.fields() for c in items], "next": following})

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, SPEND_CREATE)
        _admin(req)
        actor = req.context.principal
        with write_tx(self.db):  # The connection and its mappings, or neither.
            view = connections.create_spend_connection(
                self.db,
                body["name"],
                body["platform"],
                source=body["source"],
                credentials=body.get("credentials", {}),
                parameter=body.get("parameter", ""),
                currency=body.get("currency", ""),
                timezone=body.get("timezone", "UTC"),
                actor=actor,
            )
            if body.get("mappings"):
                view = connections.map_ids(self.db, view.id, body["mappings"], actor=actor)
        answer(req, resp, view.fields(), falcon.HTTP_201)


@api_resource
class SpendResource:
    operations = {
        "GET": Operation("A spend connection (by name or id), credentials masked (admins)."),
        "DELETE": Operation("Remove it for good: the costs it wrote and its log stay (admins)."),
        "PATCH": Operation(
            "Change its credentials, parameter, currency, timezone or mappings; pause or resume it (admins).",
            body=SPEND_UPDATE,
        ),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        _admin(req)
        answer(req, resp, connections.get_spend_connection(self.db, ref).fields())

    def on_delete(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        _admin(req)
        answer(
            req, resp, connections.remove_spend_connection(self.db, ref, actor=req.context.principal).fields()
        )

    def on_patch(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, SPEND_UPDATE)
        _admin(req)
        actor = req.context.principal
        view = connections.get_spend_connection(self.db, ref)
        if body.get("status", "active") not in CONNECTION_STATUSES:  # Refused before anything changes.
            raise falcon.HTTPBadRequest(
                title="Refused",
                description=f"A connection's status is one of {', '.join(CONNECTION_STATUSES)}.",
            )
        with write_tx(self.db):
            if {"credentials", "parameter", "currency", "timezone"} & set(body):
                view = connections.change_spend_connection(
                    self.db,
                    ref,
                    credentials=body.get("credentials"),
                    parameter=body.get("parameter"),
                    currency=body.get("currency"),
                    timezone=body.get("timezone"),
                    actor=actor,
                )
            if body.get("mappings"):
                view = connections.map_ids(self.db, ref, body["mappings"], actor=actor)
            if "status" in body:
                view = connections.set_spend_status(self.db, ref, body["status"], actor=actor)
        answer(req, resp, view.fields())


def spend_sync_queue(settings) -> Callable[[int, str], None]:
    """Queue a connection's `sync_spend_connection` task (the worker runs it); Huey is loaded at the first
    use (app.py's delivery_queue). A queue that cannot be reached is a 503: nothing was queued."""

    @functools.cache
    def queue():
        from workers.runtime.tasks import create_huey

        return create_huey(settings)

    def enqueue(connection_id: int, actor_name: str) -> None:
        try:
            queue().sync_spend_connection(connection_id, actor_name)
        except Exception:
            logger.warning("could not queue the sync of spend connection %s", connection_id, exc_info=True)
            raise falcon.HTTPServiceUnavailable(
                title="Not queued",
                description="The task queue could not be reached; try again, or run "
                "`lanner platform spend sync` on the server.",
            ) from None

    return enqueue


@api_resource
class SpendSyncResource:
    operations = {
        "POST": Operation(
            "Sync now: queue a run of the connection (the worker reads the window's spend and writes it as "
            'costs); answers 202 `{"state": "queued"}` at once, and the run shows in its log when it lands '
            "(a platform's failure is a `failed` run with its error) (admins).",
            answers={
                409: "Paused, removed, or a sync of it is running.",
                503: "The task queue is unreachable.",
            },
        )
    }

    def __init__(self, auth, db, enqueue: Callable[[int, str], None]) -> None:
        self.auth, self.db, self.enqueue = auth, db, enqueue

    def on_post(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        _admin(req)
        queued = connections.queue_sync(self.db, ref, self.enqueue, actor=req.context.principal)
        answer(req, resp, queued, falcon.HTTP_202)


@api_resource
class SpendLogResource:
    operations = {
        "GET": Operation(
            "Its syncs, newest first: rows read, costs written, unchanged, removed, rows skipped and why, "
            "or the error.",
            params=LOG_PARAMS,
        )
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        _admin(req)
        limit_text = check_params(req, LOG_PARAMS).get("limit", "20")
        if not limit_text.isascii() or not limit_text.isdigit() or not 1 <= int(limit_text) <= 1000:
            raise falcon.HTTPBadRequest(
                title="Refused", description="limit is a whole number from 1 to 1000."
            )
        answer(req, resp, {"items": connections.sync_log(self.db, ref, limit=int(limit_text))})
