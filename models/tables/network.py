"""Affiliate networks: who pays for an offer's conversions, and how their postbacks name things."""

from __future__ import annotations

import time

from peewee import AutoField, BigIntegerField, TextField

from models.tables.base import BaseModel


class Network(BaseModel):
    id = AutoField()
    name = TextField()
    # The postback's `from=` value, and the `network` of its status maps: fixed once made, since the
    # URL pasted into the network carries it.
    alias = TextField(unique=True)  # type: ignore[assignment]  # Shadows Model.alias(), unused here.
    # The network's macro for each postback parameter ('' leaves the parameter out of the URL).
    subid_macro = TextField()
    payout_macro = TextField(default="")
    status_macro = TextField(default="")
    tid_macro = TextField(default="")
    currency_macro = TextField(default="")
    offer_params = TextField(default="")  # What each offer URL adds to send the subid, e.g. sub1={subid}.
    notes = TextField(default="")
    # Which status changes its postbacks may make, and how it sends rebills (models/conversions/postbacks.py).
    status_changes = TextField(default="forward")
    rebills = TextField(default="own_tid")
    status = TextField(default="active")
    created_at = BigIntegerField(default=lambda: int(time.time() * 1000))
    updated_at = BigIntegerField(default=lambda: int(time.time() * 1000))
