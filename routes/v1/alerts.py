"""Alert channels (Telegram, Slack, a signed webhook), their log, and the operations checks' state, over
models/alerts/. Admins only: a channel holds a bot token or a webhook's secret, which every answer shows
masked to its last 4 characters."""

from __future__ import annotations

import falcon

from models.alerts import channels
from models.alerts.delivery import alert_log, queue_test, send_alert
from models.alerts.ops import ops_states
from models.alerts.senders import AlertConfig
from routes.v1.auth import require_admin
from routes.v1.spec import Field, Operation, Param, answer, api_resource, check_params, read_body

CHANNEL_CREATE = (
    Field("name", "string", required=True),
    Field("kind", "string", "telegram, slack or webhook.", required=True),
    Field("bot_token", "string", "Telegram: the bot's token (secret)."),
    Field("chat_id", "string", "Telegram: the chat (a number, or @channel)."),
    Field("webhook_url", "string", "Slack: the incoming webhook's URL (secret)."),
    Field("url", "string", "Webhook: where the signed JSON is POSTed."),
    Field("signing_secret", "string", "Webhook: the HMAC key (secret); default: one made, answered once."),
    Field("ops", "boolean", "It gets the operations alerts too."),
)
CHANNEL_CHANGE = (
    Field("bot_token", "string", "Telegram: a new token (secret)."),
    Field("chat_id", "string", "Telegram: another chat."),
    Field("webhook_url", "string", "Slack: a new webhook URL (secret)."),
    Field("url", "string", "Webhook: another URL."),
    Field("signing_secret", "string", "Webhook: a new signing secret (secret)."),
    Field("status", "string", "active or paused: resume or pause."),
    Field("ops", "boolean", "Whether it gets the operations alerts."),
)
FIELD_NAMES = ("bot_token", "chat_id", "webhook_url", "url", "signing_secret")
LOG_PARAMS = (
    Param("channel", "Only this channel's (id or name)."),
    Param("state", "pending, sent or failed."),
    Param("limit", "Alerts, newest first, 1 to 1000 (default 100).", "integer"),
)


def _admin(req: falcon.Request) -> None:
    require_admin(req, "alert channels")


@api_resource
class ChannelListResource:
    operations = {
        "GET": Operation("Alert channels, by id, secrets masked (admins)."),
        "POST": Operation(
            "Add a channel; a webhook given no signing secret answers the one made, this once (admins).",
            body=CHANNEL_CREATE,
            answers={201: "Created."},
        ),
    }

    def __init__(self, auth, db, config: AlertConfig) -> None:
        self.auth, self.db, self.config = auth, db, config

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _admin(req)
        answer(
            req, resp, {"items": [view.fields() for view in channels.list_channels(self.db)], "next": None}
        )

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = read_body(req, CHANNEL_CREATE)
        _admin(req)
        fields: dict[str, str | None] = {
            key: body[key]
            for key in ("bot_token", "chat_id", "webhook_url", "url", "signing_secret")
            if key in body
        }
        view, made = channels.create_channel(
            self.db,
            body["name"],
            body["kind"],
            fields,
            is_ops=body.get("ops", False),
            config=self.config,
            actor=req.context.principal,
        )
        shown = view.fields()
        if made:
            shown["signing_secret"] = made
        answer(req, resp, shown, falcon.HTTP_201)


@api_resource
class ChannelResource:
    operations = {
        "GET": Operation("A channel (by name or id), secrets masked (admins)."),
        "PATCH": Operation(
            "Change its token, chat, URL or secret (what waits for a retry goes at once), pause or "
            "resume it, or send it the operations alerts or not (admins).",
            body=CHANNEL_CHANGE,
        ),
    }

    def __init__(self, auth, db, config: AlertConfig) -> None:
        self.auth, self.db, self.config = auth, db, config

    def on_get(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        _admin(req)
        answer(req, resp, channels.get_channel(self.db, ref).fields())

    def on_patch(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        body = read_body(req, CHANNEL_CHANGE)
        _admin(req)
        if body.get("status", "active") not in channels.STATUSES:  # Refused before anything changes.
            raise falcon.HTTPBadRequest(
                title="Refused", description="A channel's status is active or paused."
            )
        view = channels.get_channel(self.db, ref)
        given = {key: body[key] for key in FIELD_NAMES if key in body}
        if given:
            view = channels.change_channel(
                self.db, ref, given, config=self.config, actor=req.context.principal
            )
        if "ops" in body:
            view = channels.set_channel_ops(self.db, ref, body["ops"], actor=req.context.principal)
        if "status" in body:
            view = channels.set_channel_status(self.db, ref, body["status"], actor=req.context.principal)
        answer(req, resp, view.fields())


@api_resource
class ChannelTestResource:
    operations = {
        "POST": Operation(
            "Send it a test message now: its state (sent, pending: retried by the worker, held: the channel "
            "is paused) and the service's answer (admins)."
        )
    }

    def __init__(self, auth, db, config: AlertConfig, retry_seconds: float) -> None:
        self.auth, self.db, self.config, self.retry_seconds = auth, db, config, retry_seconds

    def on_post(self, req: falcon.Request, resp: falcon.Response, ref: str) -> None:
        _admin(req)
        alert_id = queue_test(self.db, ref)
        result = send_alert(self.db, alert_id, config=self.config, retry_base=self.retry_seconds)
        answer(
            req,
            resp,
            {"alert": alert_id, "state": result.state, "response_code": result.code, "error": result.error},
        )


@api_resource
class AlertLogResource:
    operations = {
        "GET": Operation(
            "Alerts queued, newest first: state, attempts, the service's last answer (admins).",
            params=LOG_PARAMS,
        )
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _admin(req)
        given = check_params(req, LOG_PARAMS)
        state = given.get("state")
        if state is not None and state not in ("pending", "sent", "failed"):
            raise falcon.HTTPBadRequest(title="Refused", description="state is pending, sent or failed.")
        limit_text = given.get("limit", "100")
        if not limit_text.isascii() or not limit_text.isdigit() or not 1 <= int(limit_text) <= 1000:
            raise falcon.HTTPBadRequest(
                title="Refused", description="limit is a whole number from 1 to 1000."
            )
        rows = alert_log(self.db, channel=given.get("channel"), state=state, limit=int(limit_text))
        answer(req, resp, {"items": rows, "next": None})


@api_resource
class OpsCheckResource:
    operations = {
        "GET": Operation("The operations checks' last verdicts, firing ones first (admins)."),
    }

    def __init__(self, auth, db) -> None:
        self.auth, self.db = auth, db

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _admin(req)
        answer(req, resp, {"items": ops_states(self.db), "next": None})
