"""Spend connections in the panel (/panel/platforms/spend/{id}): a connection's settings (credentials
masked), its id mappings, a change form, pause / resume / remove, "Sync now" and its sync log. The list
and the new-connection form are on the platforms page (routes/panel/platforms.py). Over
models/reporting/spend/connections.py, as `lanner platform spend` and `/api/v1/spend-connections` are.
Admins only: a connection holds the install's ad account credentials.

PERF: "Sync now" runs the sync in the request, as the CLI does (docs/platforms.md has its time).
"""

from __future__ import annotations

from collections.abc import Callable

import falcon

from models.admin.services import AdminError
from models.reporting.spend import connections
from models.reporting.spend.sync import CLIENTS
from routes.panel.common import PanelContext, PanelResource, timezone_of
from routes.panel.render import Renderer
from routes.panel.session import PanelSessions, read_form
from routes.v1.spend import spend_sync_queue

PATH = "/panel/platforms/spend"
CREDENTIALS = (
    ("ad_account_id", "Meta: ad account id (act_…)"),
    ("advertiser_id", "TikTok: advertiser id"),
    ("access_token", "Meta or TikTok: access token"),
    ("api_token", "PropellerAds: API token"),
    ("level", "Meta: ad or adset; TikTok: ad or adgroup (optional)"),
)
SECRETS = frozenset(name for client in CLIENTS.values() for name in client.SECRETS)
FIELDS = (
    "name",
    "platform",
    "source",
    "parameter",
    "currency",
    "timezone",
    "mappings",
    *(n for n, _ in CREDENTIALS),
)
BLANK_FORM = dict.fromkeys(FIELDS, "")
DONE = {
    "created": "Spend connection created: sync it now to check its credentials and mappings.",
    "saved": "Saved.",
    "paused": "Paused: no sync runs; the costs it wrote stay.",
    "resumed": "Resumed: it syncs at the next run of the worker.",
    "removed": "Removed: no sync runs; its costs and log stay.",
    "queued": "Queued: the worker syncs it now; its run shows in the log below when it lands.",
}
POLL_SECONDS = 2  # How often the log looks again for a queued run (htmx), until it has landed.


def require_admin(principal) -> None:
    if principal.role != "admin":
        raise falcon.HTTPForbidden(
            title="Not allowed", description="Only an admin may see or change spend connections."
        )


def given_credentials(form: dict) -> dict[str, str]:
    """What was typed; a field left empty on a change keeps the stored value."""
    return {
        name: str(form.get(name, "")).strip() for name, _ in CREDENTIALS if str(form.get(name, "")).strip()
    }


def kept_form(form: dict) -> dict[str, str]:
    """The form to show again after a refusal: what was typed, but never a secret."""
    return {name: "" if name in SECRETS else str(form.get(name, "")).strip() for name in FIELDS}


def mapping_lines(text: str) -> dict[str, str]:
    """`PLATFORM_ID=campaign` a line (or comma-separated) as the service's mappings."""
    return connections.parse_mappings(
        [part.strip() for part in text.replace(",", "\n").splitlines() if part.strip()]
    )


def create_from_form(db, form: dict, actor):
    """The platforms page's new spend connection form: the connection and its mappings."""
    view = connections.create_spend_connection(
        db,
        str(form.get("name", "")),
        str(form.get("platform", "")),
        source=str(form.get("source", "")),
        credentials=given_credentials(form),
        parameter=str(form.get("parameter", "")),
        currency=str(form.get("currency", "")),
        timezone=str(form.get("timezone", "")) or "UTC",
        actor=actor,
    )
    mappings = mapping_lines(str(form.get("mappings", "")))
    return connections.map_ids(db, view.id, mappings, actor=actor) if mappings else view


class SpendResource(PanelResource):
    """A spend connection's page and its forms' posts: `do` says which (save, map, pause, resume,
    remove, sync)."""

    def __init__(
        self, sessions: PanelSessions, render: Renderer, enqueue: Callable[[int, str], None]
    ) -> None:
        super().__init__(sessions, render)
        self.enqueue = enqueue

    def connection(self, spend_id: int):
        try:
            return connections.get_spend_connection(self.sessions.db, spend_id)
        except AdminError as exc:
            raise falcon.HTTPNotFound(title="Not found", description=str(exc)) from None

    def on_get(self, req: falcon.Request, resp: falcon.Response, spend_id: int) -> None:
        session = self.sessions.require(req)
        require_admin(session.principal)
        view = self.connection(spend_id)
        after = req.get_param_as_int("after", min_value=0) if req.get_param("done") == "queued" else None
        self.show(req, resp, session, view, done=DONE.get(req.get_param("done") or "", ""), after=after)

    def show(self, req, resp, session, view, *, code=200, message="", done="", after=None) -> None:
        log = connections.sync_log(
            self.sessions.db, view.id, limit=50, timezone=timezone_of(session.principal)
        )
        # A queued run not landed yet (none newer than the newest when it was queued, or it still runs):
        # the log looks again every POLL_SECONDS, and stops once it shows.
        landed = (
            any(row["id"] > after and row["state"] != "running" for row in log) if after is not None else True
        )
        self.page(
            req,
            resp,
            "spend.html",
            session,
            code,
            connection=view,
            mappings_text="\n".join(f"{k}={v}" for k, v in view.mappings.items()),
            credentials=[(n, label) for n, label in CREDENTIALS if n in CLIENTS[view.platform].CREDENTIALS],
            secrets=SECRETS,
            log=log,
            poll=None if landed else (f"{PATH}/{view.id}?done=queued&after={after}", POLL_SECONDS),
            message=message,
            done=done,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response, spend_id: int) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        require_admin(session.principal)
        view = self.connection(spend_id)
        db, actor, action = self.sessions.db, session.principal, form.get("do")
        try:
            if action == "save":
                connections.change_spend_connection(
                    db,
                    view.id,
                    credentials=given_credentials(form),
                    parameter=str(form.get("parameter", "")),
                    currency=str(form.get("currency", "")),
                    timezone=str(form.get("timezone", "")) or "UTC",
                    actor=actor,
                )
                done = "saved"
            elif action == "map":
                wanted = mapping_lines(str(form.get("mappings", "")))
                gone = {external: "" for external in view.mappings if external not in wanted}
                connections.map_ids(db, view.id, gone | wanted, actor=actor)
                done = "saved"
            elif action in ("pause", "resume"):
                connections.set_spend_status(
                    db, view.id, "paused" if action == "pause" else "active", actor=actor
                )
                done = "paused" if action == "pause" else "resumed"
            elif action == "remove":
                connections.remove_spend_connection(db, view.id, actor=actor)
                done = "removed"
            elif action == "sync":
                newest = connections.sync_log(db, view.id, limit=1)
                connections.queue_sync(db, view.id, self.enqueue, actor=actor)
                resp.status = falcon.HTTP_303
                resp.location = f"{PATH}/{view.id}?done=queued&after={newest[0]['id'] if newest else 0}"
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
    app.add_route(
        PATH + "/{spend_id:int(min=1, max=9223372036854775807)}",
        SpendResource(panel.sessions, panel.render, spend_sync_queue(panel.settings)),
    )
