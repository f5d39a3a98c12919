"""Alert channels, the alerts queued to them, and the operations checks' state (migration 0029): the rows
models/alerts/ keeps."""

from __future__ import annotations

from peewee import AutoField, BigIntegerField, IntegerField, TextField

from models.tables.base import BaseModel


class AlertChannel(BaseModel):
    id = AutoField()
    name = TextField(unique=True)
    kind = TextField()  # telegram, slack, webhook
    secrets = TextField()  # JSON: bot_token / webhook_url / url and signing_secret; never shown whole.
    options = TextField()  # JSON: chat_id ...; shown as they are.
    is_ops = IntegerField(default=0)  # Gets the operations alerts.
    status = TextField(default="active")  # active, paused
    created_at = BigIntegerField()
    updated_at = BigIntegerField()

    class Meta:
        table_name = "alert_channel"


class Alert(BaseModel):
    id = AutoField()
    channel_id = BigIntegerField()
    dedupe_key = TextField()  # Unique per channel: what the message is about, once.
    kind = TextField()  # rule, ops, test
    title = TextField()
    body = TextField()  # Plain text; each channel's sender escapes it for its format.
    data = TextField()  # JSON: the numbers behind the message (the webhook's payload).
    state = TextField(default="pending")  # pending, sent, failed
    attempts = IntegerField(default=0)
    next_attempt_at = BigIntegerField()
    response_code = IntegerField(null=True)
    error = TextField(default="")
    created_at = BigIntegerField()
    updated_at = BigIntegerField()
    sent_at = BigIntegerField(null=True)


class OpsAlertState(BaseModel):
    name = TextField(primary_key=True)  # spool_backlog, consumer, disk, certificate:<domain> ...
    is_firing = IntegerField()
    since = BigIntegerField()
    detail = TextField(default="")
    checked_at = BigIntegerField()

    class Meta:
        table_name = "ops_alert_state"
