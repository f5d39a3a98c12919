"""Ad platform connections (/panel/platforms): the list, a new connection, and a connection's page: its
settings (credentials masked to their last 4 characters), a change form, pause / resume, "send a test
event" and its event log. Over models/conversions/platforms/connections.py, as `lanner platform` and
`/api/v1/platform-connections` are. Admins only: a connection holds the install's ad account
credentials. Reached from the postbacks page (the nav has no room left at 1280 px).
"""

from __future__ import annotations

import falcon

from models.admin.services import AdminError, list_campaigns
from models.admin.sources import list_sources
from models.choices import PLATFORMS, SPEND_PLATFORMS
from models.conversions.platforms import connections
from models.conversions.platforms.sending import PLATFORMS as CLIENTS
from models.conversions.platforms.sending import PlatformConfig
from models.reporting.spend.connections import list_spend_connections
from routes.panel import spend
from routes.panel.common import PanelContext, PanelResource, timezone_of
from routes.panel.flash import Flash
from routes.panel.render import Renderer
from routes.panel.session import PanelSessions, read_form

PATH = "/panel/platforms"
CREDENTIALS = (
    ("pixel_id", "Meta: pixel (dataset) id"),
    ("access_token", "Meta or TikTok: access token"),
    ("pixel_code", "TikTok: pixel code"),
    ("customer_id", "Google Ads: customer id"),
    ("conversion_action", "Google Ads: conversion action id"),
    ("developer_token", "Google Ads: developer token"),
    ("oauth_token", "Google Ads: OAuth access token"),
    ("login_customer_id", "Google Ads: manager's customer id (optional)"),
)
SECRETS = frozenset(name for client in CLIENTS.values() for name in client.SECRETS)
FIELDS = ("name", "platform", "scope", "events", "test_event_code", *(name for name, _ in CREDENTIALS))
BLANK_FORM = dict.fromkeys(FIELDS, "")
DONE = {
    "created": "Connection created: send a test event to check its credentials.",
    "saved": "Saved.",
    "paused": "Paused: new conversions queue nothing; queued events wait.",
    "resumed": "Resumed: the events it held are sent within a minute.",
    "removed": "Removed: nothing more is sent; its log stays.",
}


def require_admin(principal) -> None:
    if principal.role != "admin":
        raise falcon.HTTPForbidden(
            title="Not allowed", description="Only an admin may see or change ad platform connections."
        )


def parse_events(text: str) -> list[str]:
    """`lead=Lead, sale=Purchase` as the service's expressions."""
    return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]


def given_credentials(form: dict) -> dict[str, str]:
    """What was typed; a field left empty on a change keeps the stored value."""
    return {
        name: str(form.get(name, "")).strip() for name, _ in CREDENTIALS if str(form.get(name, "")).strip()
    }


def kept_form(form: dict) -> dict[str, str]:
    """The form to show again after a refusal: what was typed, but never a secret."""
    return {name: "" if name in SECRETS else str(form.get(name, "")).strip() for name in FIELDS}


class PlatformListResource(PanelResource):
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        require_admin(session.principal)
        self.show(req, resp, session)

    def show(
        self, req, resp, session, *, code=200, form=None, message="", spend_form=None, spend_message=""
    ) -> None:
        db = self.sessions.db
        self.page(
            req,
            resp,
            "platforms.html",
            session,
            code,
            rows=connections.list_connections(db),
            campaigns=list_campaigns(db),
            sources=list_sources(db),
            platforms=PLATFORMS,
            credentials=CREDENTIALS,
            secrets=SECRETS,
            defaults={name: client.DEFAULT_EVENTS for name, client in CLIENTS.items()},
            form=form or BLANK_FORM,
            message=message,
            spend_rows=list_spend_connections(db),
            spend_platforms=SPEND_PLATFORMS,
            spend_credentials=spend.CREDENTIALS,
            spend_secrets=spend.SECRETS,
            spend_form=spend_form or spend.BLANK_FORM,
            spend_message=spend_message,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        require_admin(session.principal)
        if form.get("do") == "spend":
            try:
                created = spend.create_from_form(self.sessions.db, form, session.principal)
            except AdminError as exc:
                kept = spend.kept_form(form)
                self.show(req, resp, session, code=400, spend_form=kept, spend_message=str(exc))
                return
            resp.status = falcon.HTTP_303
            resp.location = f"{spend.PATH}/{created.id}?done=created"
            return
        scope = str(form.get("scope", ""))
        kind, _, ref = scope.partition(":")
        try:
            view = connections.create_connection(
                self.sessions.db,
                str(form.get("name", "")),
                str(form.get("platform", "")),
                campaign=ref if kind == "campaign" else None,
                source=ref if kind == "source" else None,
                credentials=given_credentials(form),
                events=parse_events(str(form.get("events", ""))) or None,
                test_event_code=str(form.get("test_event_code", "")),
                actor=session.principal,
            )
        except AdminError as exc:
            self.show(req, resp, session, code=400, form=kept_form(form), message=str(exc))
            return
        resp.status = falcon.HTTP_303
        resp.location = f"{PATH}/{view.id}?done=created"


class PlatformResource(PanelResource):
    """A connection's page and its forms' posts: `do` says which (save, pause, resume, test)."""

    def __init__(self, sessions: PanelSessions, render: Renderer, config: PlatformConfig) -> None:
        super().__init__(sessions, render)
        self.config = config

    def connection(self, connection_id: int):
        try:
            return connections.get_connection(self.sessions.db, connection_id)
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None

    def on_get(self, req: falcon.Request, resp: falcon.Response, connection_id: int) -> None:
        session = self.sessions.require(req)
        require_admin(session.principal)
        view = self.connection(connection_id)
        result = Flash(self.sessions).take(req, resp, session)
        self.show(req, resp, session, view, done=DONE.get(req.get_param("done") or "", ""), result=result)

    def show(self, req, resp, session, view, *, code=200, message="", done="", result=None) -> None:
        self.page(
            req,
            resp,
            "platform.html",
            session,
            code,
            connection=view,
            events_text=", ".join(f"{status}={name}" for status, name in view.events.items()),
            credentials=[
                (name, label) for name, label in CREDENTIALS if name in CLIENTS[view.platform].CREDENTIALS
            ],
            secrets=SECRETS,
            log=connections.connection_log(
                self.sessions.db, view.id, limit=100, timezone=timezone_of(session.principal)
            ),
            message=message,
            done=done,
            result=result,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, connection_id: int) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        require_admin(session.principal)
        view = self.connection(connection_id)
        db, actor, action = self.sessions.db, session.principal, form.get("do")
        try:
            if action == "save":
                connections.change_connection(
                    db,
                    view.id,
                    credentials=given_credentials(form),
                    events=parse_events(str(form.get("events", ""))) or None,
                    test_event_code=str(form.get("test_event_code", "")),
                    actor=actor,
                )
                done = "saved"
            elif action in ("pause", "resume"):
                connections.set_connection_status(
                    db, view.id, "paused" if action == "pause" else "active", actor=actor
                )
                done = "paused" if action == "pause" else "resumed"
            elif action == "remove":
                connections.remove_connection(db, view.id, actor=actor)
                done = "removed"
            elif action == "test":
                answer = connections.test_connection(db, view.id, self.config)
                result = {"ok": answer.ok, "text": answer.text}
                if not Flash(self.sessions).put(req, resp, session, f"{PATH}/{view.id}", result):
                    self.show(req, resp, session, view, result=result)
                return
            else:
                raise falcon.HTTPBadRequest(
                    title="Bad form", description="This form asks for nothing the page does."
                )
        except AdminError as exc:
            self.show(req, resp, session, view, code=400, message=str(exc))
            return
        resp.status = falcon.HTTP_303
        resp.location = f"{PATH}/{view.id}?done={done}"


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    app.add_route(PATH, PlatformListResource(panel.sessions, panel.render))
    app.add_route(
        PATH + "/{connection_id:int(min=1, max=9223372036854775807)}",
        PlatformResource(panel.sessions, panel.render, PlatformConfig.from_settings(panel.settings)),
    )
