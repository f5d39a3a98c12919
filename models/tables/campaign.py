"""Campaigns and their streams: the routing configuration a click is decided by.

Streams carry a type, a position, filters and an action so that routing (filters, stream types,
caps) fits without a schema change. Streams are never renumbered: editing updates rows in place.
"""

from __future__ import annotations

import secrets
import time

from peewee import (
    AutoField,
    BigIntegerField,
    FloatField,
    ForeignKeyField,
    IntegerField,
    ObjectIdAccessor,
    TextField,
)

from models.tables.base import BaseModel
from models.tables.offer import Offer


def now_ms() -> int:
    return int(time.time() * 1000)


def new_token() -> str:
    """A campaign's Click API token (routes/clickapi.py): 32 random hex digits (Keitaro's have 32)."""
    return secrets.token_hex(16)


class Campaign(BaseModel):
    id = AutoField()
    alias = TextField(unique=True)  # type: ignore[assignment]  # Shadows Model.alias(), unused here.
    name = TextField()
    status = TextField(default="active")
    rotation = TextField(default="position")
    uniqueness_hours = FloatField(default=24.0)
    timezone = TextField(default="UTC")
    cost_model = TextField(default="cpc")
    cost_value = FloatField(default=0.0)
    cost_currency = TextField(default="USD")
    bind_visitor = IntegerField(default=0)  # A returning visitor gets their previous stream and offer.
    default_action = TextField(default="not_found")
    default_payload = TextField(default="")  # The URL when default_action is "redirect".
    owner_id = IntegerField(null=True)  # A user (app_user); NULL: owned by nobody, admins only.
    source_id = IntegerField(null=True)  # Its traffic source (models/tables/source.py); NULL: none.
    token = TextField(null=True, unique=True, default=new_token)  # Its Click API token (migration 0019).
    created_at = BigIntegerField(default=now_ms)
    updated_at = BigIntegerField(default=now_ms)


class Stream(BaseModel):
    id = AutoField()
    campaign = ForeignKeyField(Campaign, backref="streams", column_name="campaign_id")
    campaign_id: ObjectIdAccessor  # The column's value, which peewee adds for the foreign key.
    name = TextField(default="")
    type = TextField(default="regular")
    position = IntegerField(default=1)
    weight = IntegerField(default=100)
    action = TextField(default="offers")
    action_payload = TextField(default="")
    filters = TextField(default="[]")
    filter_mode = TextField(default="and")
    daily_cap = IntegerField(null=True)
    total_cap = IntegerField(null=True)
    offer_rotation = TextField(default="weight")
    lander_rotation = TextField(default="weight")  # weight, bandit_cr (its LP CTR), bandit_epc (0033).
    redirect_type = TextField(default="http")
    fallback_offer_id = IntegerField(null=True)  # Used when every offer of the stream is capped.
    status = TextField(default="active")
    created_at = BigIntegerField(default=now_ms)
    updated_at = BigIntegerField(default=now_ms)


class StreamOffer(BaseModel):
    id = AutoField()
    stream = ForeignKeyField(Stream, backref="offer_links", column_name="stream_id")
    offer = ForeignKeyField(Offer, backref="stream_links", column_name="offer_id")
    stream_id: ObjectIdAccessor  # The columns' values, which peewee adds for the foreign keys.
    offer_id: ObjectIdAccessor
    weight = IntegerField(default=100)
    status = TextField(default="active")

    class Meta:
        indexes = ((("stream", "offer"), True),)


class CampaignTag(BaseModel):
    """A tag on a campaign (migration 0027): the campaign list's groups (models/admin/tags.py)."""

    id = AutoField()
    campaign = ForeignKeyField(Campaign, backref="tag_links", column_name="campaign_id")
    campaign_id: ObjectIdAccessor  # The column's value, which peewee adds for the foreign key.
    tag = TextField()

    class Meta:
        table_name = "campaign_tag"
        indexes = ((("campaign", "tag"), True),)
