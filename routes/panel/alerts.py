"""Alert channels in the panel (/panel/alerts): the channels (secrets masked to their last 4
characters), a new channel's form, pause / resume, operations alerts on or off and "send a test" for
each, the operations checks' state and the alert log. Over models/alerts/, as `lanner alert` and
`/api/v1/alert-channels` are. Admins only: a channel holds a bot token or a webhook's secret. Reached
from the rules page and the status page.
"""

from __future__ import annotations

import falcon

from models.admin.errors import AdminError
from models.alerts import channels
from models.alerts.delivery import alert_log, queue_test, send_alert
from models.alerts.ops import ops_states
from models.alerts.senders import AlertConfig
from models.reporting.timerange import local_iso, zone
from routes.panel.common import PanelContext, PanelResource, timezone_of
from routes.panel.flash import Flash
from routes.panel.render import Renderer
from routes.panel.session import PanelSessions, read_form

PATH = "/panel/alerts"
FIELDS = ("bot_token", "chat_id", "webhook_url", "url", "signing_secret")
SECRETS = frozenset(("bot_token", "webhook_url", "signing_secret"))
BLANK_FORM = {"name": "", "kind": "telegram", **dict.fromkeys(FIELDS, ""), "ops": ""}
DONE = {
    "paused": "Paused: its alerts queue and wait.",
    "resumed": "Resumed: what waited is sent within a minute.",
    "ops_on": "It gets the operations alerts.",
    "ops_off": "It no longer gets the operations alerts.",
}


def require_admin(principal) -> None:
    if principal.role != "admin":
        raise falcon.HTTPForbidden(
            title="Not allowed", description="Only an admin may see or change alert channels."
        )


class AlertsResource(PanelResource):
    def __init__(
        self, sessions: PanelSessions, render: Renderer, config: AlertConfig, retry_seconds: float
    ) -> None:
        super().__init__(sessions, render)
        self.config, self.retry_seconds = config, retry_seconds

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        require_admin(session.principal)
        result = Flash(self.sessions).take(req, resp, session)
        self.show(req, resp, session, done=DONE.get(req.get_param("done") or "", ""), result=result)

    def show(self, req, resp, session, *, code=200, form=None, message="", done="", result=None) -> None:
        db = self.sessions.db
        tz = timezone_of(session.principal)
        states = ops_states(db)
        for row in states:
            row["since"] = local_iso(row["since"], zone(tz))[:16].replace("T", " ")
        self.page(
            req,
            resp,
            "alerts.html",
            session,
            code,
            rows=channels.list_channels(db),
            kinds=channels.KINDS,
            log=alert_log(db, limit=50, timezone=tz),
            states=states,
            form=form or BLANK_FORM,
            message=message,
            done=done,
            result=result,
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        session = self.sessions.require(req)
        form = read_form(req)
        self.sessions.check_write(req, session, form)
        require_admin(session.principal)
        db, actor, action = self.sessions.db, session.principal, form.get("do", "add")
        try:
            if action == "add":
                kind = str(form.get("kind", ""))
                # Only the fields of the kind chosen: the form shows them all.
                wanted = [*channels.FIELDS.get(kind, ((), ()))[0], *channels.FIELDS.get(kind, ((), ()))[1]]
                given: dict[str, str | None] = {
                    name: str(form.get(name, "")).strip() or None for name in wanted
                }
                view, made = channels.create_channel(
                    db,
                    str(form.get("name", "")),
                    kind,
                    given,
                    is_ops=bool(form.get("ops")),
                    config=self.config,
                    actor=actor,
                )
                text = f"Channel {view.name} added."
                if made:  # Answered on this page, never put in a cookie.
                    text += f" Its signing secret, shown this once: {made}"
                said = {"ok": True, "text": text}
                if made:
                    self.show(req, resp, session, result=said)
                    return
                self.done(req, resp, session, said)
                return
            ref = str(form.get("channel", ""))
            if action == "test":
                alert_id = queue_test(db, ref)
                sent = send_alert(db, alert_id, config=self.config, retry_base=self.retry_seconds)
                text = (
                    "The channel accepted the test alert."
                    if sent.state == "sent"
                    else "The channel is paused: the test waits for it."
                    if sent.state == "held"
                    else f"Not sent (the worker tries again): {sent.error}"
                )
                self.done(req, resp, session, {"ok": sent.state == "sent", "text": text})
                return
            if action in ("pause", "resume"):
                channels.set_channel_status(db, ref, "paused" if action == "pause" else "active", actor=actor)
                done = "paused" if action == "pause" else "resumed"
            elif action in ("ops_on", "ops_off"):
                channels.set_channel_ops(db, ref, action == "ops_on", actor=actor)
                done = action
            else:
                raise falcon.HTTPBadRequest(
                    title="Bad form", description="This form asks for nothing the page does."
                )
        except AdminError as exc:
            kept = {
                **BLANK_FORM,
                **{
                    k: str(form.get(k, ""))
                    for k in ("name", "kind", "chat_id", "url", "ops")
                    if form.get(k) is not None
                },
            }
            self.show(req, resp, session, code=400, form=kept, message=str(exc))
            return
        resp.status = falcon.HTTP_303
        resp.location = f"{PATH}?done={done}"

    def done(self, req, resp, session, result: dict) -> None:
        if not Flash(self.sessions).put(req, resp, session, PATH, result):
            self.show(req, resp, session, result=result)


def add_routes(app: falcon.App, panel: PanelContext) -> None:
    config = AlertConfig.from_settings(panel.settings)
    app.add_route(
        PATH, AlertsResource(panel.sessions, panel.render, config, panel.settings.alert_retry_seconds)
    )
