"""Alert channels: add, list, show (secrets masked), pause and resume them. The library the CLI and the
admin API call; every refusal is an AdminError with one sentence for the user; every change is in the
audit log (entity `alert_channel`) with its secrets masked.

A channel's secrets (a Telegram bot token, a Slack webhook URL, a webhook's signing secret) must be sent,
so like a platform connection's credentials (models/conversions/platforms/connections.py) they are
stored as given, never logged, and every view masks them to their last 4 characters. A webhook's
signing secret Lanner makes when none is given is shown once, when the channel is added.
"""

from __future__ import annotations

import json
import re
import secrets as random
import time
from dataclasses import dataclass
from typing import Any

from peewee import Database

from models.accounts.audit import record_change
from models.accounts.principal import CLI, Principal
from models.admin.errors import AdminConflict, AdminError
from models.admin.rows import find_by_name_or_id
from models.alerts.senders import AlertConfig
from models.conversions.platforms.connections import mask
from models.store.database import write_tx
from models.tables.alerts import Alert, AlertChannel

KINDS = ("telegram", "slack", "webhook")
STATUSES = ("active", "paused")
MAX_NAME = 100
MAX_VALUE = 2000
# What each kind needs: (secrets, options).
FIELDS = {
    "telegram": (("bot_token",), ("chat_id",)),
    "slack": (("webhook_url",), ()),
    "webhook": (("signing_secret",), ("url",)),
}
_BOT_TOKEN = re.compile(r"[0-9]{1,20}:[A-Za-z0-9_-]{20,100}")
_CHAT_ID = re.compile(r"-?[0-9]{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31}")
MIN_SIGNING_SECRET = 16


@dataclass(frozen=True)
class ChannelView:
    """What is shown of a channel: its secrets masked."""

    id: int
    name: str
    kind: str
    secrets: dict[str, str]
    options: dict[str, str]
    is_ops: bool
    status: str
    created_at: int
    updated_at: int

    def fields(self) -> dict[str, Any]:
        return {**self.__dict__, "ops": self.is_ops}


def _now() -> int:
    return int(time.time() * 1000)


def _view(row: AlertChannel) -> ChannelView:
    return ChannelView(
        row.id,
        row.name,
        row.kind,
        {key: mask(value) for key, value in json.loads(row.secrets).items()},
        json.loads(row.options),
        bool(row.is_ops),
        row.status,
        row.created_at,
        row.updated_at,
    )


def _value(key: str, value: str | None) -> str:
    value = (value or "").strip()
    if len(value) > MAX_VALUE or any(ord(c) < 32 for c in value):
        raise AdminError(f"The {key} is not usable: at most {MAX_VALUE} printable characters.")
    return value


def _http_url(key: str, value: str) -> str:
    if not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", value):
        raise AdminError(f"The {key} must be an http:// or https:// URL.")
    return value


def check_fields(
    kind: str, given: dict[str, str | None], config: AlertConfig
) -> tuple[dict[str, str], dict[str, str], str]:
    """(secrets, options, a signing secret made here or '') for a channel of `kind`; AdminError for a
    field it has not, one it needs and lacks, or a value its service would refuse."""
    if kind not in KINDS:
        raise AdminError(f"An alert channel is one of {', '.join(KINDS)}, not {kind[:20]!r}.")
    secret_keys, option_keys = FIELDS[kind]
    values = {key: _value(key, value) for key, value in given.items() if value is not None}
    unknown = sorted(set(values) - set(secret_keys) - set(option_keys))
    if unknown:
        raise AdminError(
            f"A {kind} channel has no {', '.join(unknown)} (it takes {', '.join(secret_keys + option_keys)})."
        )
    made = ""
    if kind == "webhook" and not values.get("signing_secret"):
        made = values["signing_secret"] = random.token_hex(32)
    missing = [key for key in secret_keys + option_keys if not values.get(key)]
    if missing:
        raise AdminError(f"A {kind} channel needs its {', '.join(missing)}.")
    if kind == "telegram":
        if not _BOT_TOKEN.fullmatch(values["bot_token"]):
            raise AdminError("A Telegram bot token looks like 123456789:AAE… (as @BotFather gave it).")
        if not _CHAT_ID.fullmatch(values["chat_id"]):
            raise AdminError("A Telegram chat id is a number (-100… for a group or channel) or @channelname.")
    elif kind == "slack":
        prefix = config.slack_webhook_url + "/services/"
        if not values["webhook_url"].startswith(prefix) or len(values["webhook_url"]) <= len(prefix):
            raise AdminError(f"A Slack incoming webhook's URL starts with {prefix}.")
    else:
        _http_url("url", values["url"])
        if len(values["signing_secret"]) < MIN_SIGNING_SECRET:
            raise AdminError(f"A webhook's signing secret is at least {MIN_SIGNING_SECRET} characters.")
    return (
        {key: values[key] for key in secret_keys},
        {key: values[key] for key in option_keys},
        made,
    )


def get_channel_row(ref: str | int) -> AlertChannel:
    return find_by_name_or_id(AlertChannel, AlertChannel.name, ref, "alert channel")


def create_channel(
    db: Database,
    name: str,
    kind: str,
    fields: dict[str, str | None],
    *,
    is_ops: bool = False,
    config: AlertConfig,
    actor: Principal = CLI,
) -> tuple[ChannelView, str]:
    """A new active channel, and the signing secret made for a webhook given none ('' otherwise: shown
    this once, never again)."""
    name = name.strip()
    if not name or len(name) > MAX_NAME:
        raise AdminError(f"An alert channel's name is 1 to {MAX_NAME} characters.")
    kind = kind.strip().lower()
    secrets, options, made = check_fields(kind, fields, config)
    with write_tx(db):
        if AlertChannel.get_or_none(AlertChannel.name == name) is not None:
            raise AdminConflict(f"There is an alert channel named {name!r} already.")
        now = _now()
        row = AlertChannel.create(
            name=name,
            kind=kind,
            secrets=json.dumps(secrets),
            options=json.dumps(options),
            is_ops=int(is_ops),
            status="active",
            created_at=now,
            updated_at=now,
        )
        view = _view(row)
        record_change(db, actor, "alert_channel", row.id, "create", None, view.fields())
    return view, made


def list_channels(db: Database) -> list[ChannelView]:
    return [_view(row) for row in AlertChannel.select().order_by(AlertChannel.id)]


def get_channel(db: Database, ref: str | int) -> ChannelView:
    return _view(get_channel_row(ref))


def set_channel_status(db: Database, ref: str | int, status: str, *, actor: Principal = CLI) -> ChannelView:
    """Pause (alerts queue and wait) or resume (what waited is due at once)."""
    if status not in STATUSES:
        raise AdminError(f"An alert channel's status is one of {', '.join(STATUSES)}, not {status[:20]!r}.")
    with write_tx(db):
        row = get_channel_row(ref)
        before = row.status
        if before != status:
            now = _now()
            row.status, row.updated_at = status, now
            row.save()
            if status == "active":
                Alert.update(next_attempt_at=now, updated_at=now).where(
                    (Alert.channel_id == row.id) & (Alert.state == "pending")
                ).execute()
            record_change(
                db, actor, "alert_channel", row.id, "update", {"status": before}, {"status": status}
            )
    return _view(row)


def change_channel(
    db: Database,
    ref: str | int,
    fields: dict[str, str | None],
    *,
    config: AlertConfig,
    actor: Principal = CLI,
) -> ChannelView:
    """New secrets or options (a token fixed, a chat moved), checked as at creation; what waited for a
    retry is due at once, so an alert held up by a bad token goes as soon as the token is right."""
    given = {key: value for key, value in fields.items() if value is not None and value.strip()}
    if not given:
        raise AdminError(
            "Give the channel's new settings (bot_token, chat_id, webhook_url, url or signing_secret)."
        )
    with write_tx(db):
        row = get_channel_row(ref)
        merged = {**json.loads(row.secrets), **json.loads(row.options), **given}
        secrets, options, _ = check_fields(row.kind, merged, config)
        before = _view(row)
        now = _now()
        row.secrets, row.options, row.updated_at = json.dumps(secrets), json.dumps(options), now
        row.save()
        if row.status == "active":
            Alert.update(next_attempt_at=now, updated_at=now).where(
                (Alert.channel_id == row.id) & (Alert.state == "pending")
            ).execute()
        after = _view(row)
        record_change(db, actor, "alert_channel", row.id, "update", before.fields(), after.fields())
    return after


def set_channel_ops(db: Database, ref: str | int, is_ops: bool, *, actor: Principal = CLI) -> ChannelView:
    """Whether the channel gets the operations alerts."""
    with write_tx(db):
        row = get_channel_row(ref)
        before = bool(row.is_ops)
        row.is_ops, row.updated_at = int(is_ops), _now()
        row.save()
        record_change(db, actor, "alert_channel", row.id, "update", {"ops": before}, {"ops": is_ops})
    return _view(row)
