"""Spend connections, their id mappings and their sync log (migration 0028), as Peewee models for
models/reporting/spend/."""

from __future__ import annotations

from peewee import AutoField, BigIntegerField, IntegerField, TextField

from models.tables.base import BaseModel


class SpendConnection(BaseModel):
    """An ad account whose daily spend is pulled into cost sets (models/reporting/spend/)."""

    id = AutoField()
    name = TextField(unique=True)
    platform = TextField()  # meta, tiktok, propellerads
    # The traffic source whose click parameter `parameter` is; NULL once a removed connection let go of it.
    source_id = IntegerField(null=True)
    parameter = TextField(default="")  # The click parameter holding the row's ad / zone id; '' per campaign.
    credentials = TextField(default="{}")  # JSON; never logged, shown back masked.
    currency = TextField(default="")  # The spend's currency when the platform does not say it.
    timezone = TextField(default="UTC")  # The ad account's: its days are days there.
    status = TextField(default="active")  # active, paused, removed
    # Unix ms before which the periodic sync leaves it alone: the platform's Retry-After (migration 0034).
    retry_after_at = BigIntegerField(null=True)
    created_at = BigIntegerField()
    updated_at = BigIntegerField()

    class Meta:
        table_name = "spend_connection"


class SpendMapping(BaseModel):
    """One of the platform's campaign, ad set or ad ids, and the Lanner campaign its spend is of."""

    id = AutoField()
    connection_id = IntegerField()
    external_id = TextField()
    campaign_id = IntegerField()

    class Meta:
        table_name = "spend_mapping"


class SpendSync(BaseModel):
    """One run of a connection's sync: what it read, wrote, left alone and skipped, or its error."""

    id = AutoField()
    connection_id = IntegerField()
    started_at = BigIntegerField()
    finished_at = BigIntegerField(null=True)
    since = TextField()
    until = TextField()
    state = TextField(default="running")  # running, done, failed
    rows = IntegerField(default=0)
    written = IntegerField(default=0)
    unchanged = IntegerField(default=0)
    removed = IntegerField(default=0)
    skipped = IntegerField(default=0)
    note = TextField(default="")  # The skipped rows in one sentence.
    error = TextField(default="")  # Why the run failed, in one sentence.

    class Meta:
        table_name = "spend_sync"
