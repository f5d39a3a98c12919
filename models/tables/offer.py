"""Offers: where a stream sends its visitors, as a URL template with macros."""

from __future__ import annotations

import time

from peewee import AutoField, BigIntegerField, FloatField, IntegerField, TextField

from models.tables.base import BaseModel


class Offer(BaseModel):
    id = AutoField()
    name = TextField()
    url = TextField()
    status = TextField(default="active")
    payout = FloatField(default=0.0)
    currency = TextField(default="USD")
    daily_cap = IntegerField(null=True)
    total_cap = IntegerField(null=True)
    timezone = TextField(default="UTC")  # Daily caps roll over at midnight here.
    network_id = IntegerField(null=True)  # The affiliate network paying for it (models/tables/network.py).
    created_at = BigIntegerField(default=lambda: int(time.time() * 1000))
    updated_at = BigIntegerField(default=lambda: int(time.time() * 1000))
