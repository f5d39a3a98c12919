"""Conversion rows and the postback tables, as Peewee models for the CLI and reports.

Written on the postback path by models/conversions/postbacks.py (through models/store/conversions.py)
and by models/conversions/outbound.py.
"""

from __future__ import annotations

from peewee import AutoField, BigIntegerField, CompositeKey, FloatField, IntegerField, TextField

from models.choices import CONVERSION_STATUSES
from models.tables.base import BaseModel

LEAD, SALE, REJECTED, REBILL, TRASH = CONVERSION_STATUSES
STATUSES = CONVERSION_STATUSES


class Conversion(BaseModel):
    id = AutoField()
    subid = TextField()
    tid = TextField(default="")  # The network's transaction id; '' when none was sent.
    status = TextField()  # lead, sale, rejected, rebill, trash, or an unmapped word as received.
    original_status = TextField()
    raw_status = TextField(default="")
    network = TextField(default="")  # The postback's `from=`.
    payout = FloatField(default=0.0)
    currency = TextField(default="USD")  # The payout's, as received (or the offer's).
    cost = FloatField(default=0.0)  # Per-conversion cost models (CPA, CPS, RevShare), report currency.
    click_id = IntegerField()
    campaign_id = IntegerField()
    stream_id = IntegerField(null=True)
    offer_id = IntegerField(null=True)
    click_created_at = BigIntegerField()
    created_at = BigIntegerField()
    updated_at = BigIntegerField()
    report_payout = FloatField(null=True)  # The payout in the report currency; NULL: no rate yet.
    previous_status = TextField(default="")  # The status its last change moved it from; '' if none yet.


class PostbackLog(BaseModel):
    id = AutoField()
    received_at = BigIntegerField()
    method = TextField()
    remote_ip = TextField()
    request = TextField()  # As received, the key masked.
    subid = TextField(default="")
    tid = TextField(default="")
    raw_status = TextField(default="")
    params = TextField(default="{}")
    verdict = TextField()
    detail = TextField(default="")
    conversion_id = IntegerField(null=True)
    expires_at = BigIntegerField(null=True)  # Parked postbacks only.


class PostbackRefusal(BaseModel):
    """Postbacks refused before their key was right, counted per UTC day and source address."""

    day = IntegerField()  # 20261201
    remote_ip = TextField()  # Or `other`, past the day's address cap.
    refusals = IntegerField()
    first_at = BigIntegerField()
    last_at = BigIntegerField()
    sample_hour = BigIntegerField()
    samples = IntegerField()  # Taken in sample_hour.
    sample = TextField()  # The last one taken, key masked.

    class Meta:
        primary_key = CompositeKey("day", "remote_ip")


class StatusMap(BaseModel):
    network = TextField()
    raw_status = TextField()
    status = TextField()

    class Meta:
        primary_key = False


class PostbackTarget(BaseModel):
    id = AutoField()
    campaign_id = IntegerField()
    statuses = TextField()  # Comma-separated.
    url = TextField()
    method = TextField(default="GET")
    status = TextField(default="active")
    created_at = BigIntegerField()
    source_id = IntegerField(null=True)  # Made for the campaign's traffic source: follows the source.


class PostbackDelivery(BaseModel):
    id = AutoField()
    conversion_id = IntegerField()
    target_id = IntegerField(null=True)  # A postback target's delivery; NULL for a platform's.
    status = TextField()
    state = TextField(default="pending")  # pending, sent, failed, expired (a platform's time limit)
    attempts = IntegerField(default=0)
    next_attempt_at = BigIntegerField()
    url = TextField(default="")
    response_code = IntegerField(null=True)
    error = TextField(default="")
    created_at = BigIntegerField()
    updated_at = BigIntegerField()
    connection_id = IntegerField(null=True)  # A platform connection's event (migration 0024).


class PlatformConnection(BaseModel):
    """Conversions sent to an ad platform's conversion API (models/conversions/platforms/)."""

    id = AutoField()
    name = TextField(unique=True)
    platform = TextField()  # meta, tiktok, google_ads
    campaign_id = IntegerField(null=True)  # One campaign's conversions, or
    source_id = IntegerField(null=True)  # those of every campaign of a traffic source.
    credentials = TextField(default="{}")  # JSON; never logged, shown back masked.
    events = TextField(default="{}")  # JSON: conversion status -> the platform's event name.
    test_event_code = TextField(default="")  # Meta's: events go to Test Events, not to the ads.
    status = TextField(default="active")  # active, paused, removed
    created_at = BigIntegerField()
    updated_at = BigIntegerField()

    class Meta:
        table_name = "platform_connection"
