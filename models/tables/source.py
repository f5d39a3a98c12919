"""Traffic sources: the ad networks campaigns buy from, their parameters and postback template."""

from __future__ import annotations

import time

from peewee import AutoField, BigIntegerField, TextField

from models.tables.base import BaseModel


def _now_ms() -> int:
    return int(time.time() * 1000)


class TrafficSource(BaseModel):
    id = AutoField()
    name = TextField(unique=True)
    # JSON list of {"name", "placeholder", "field"}: the campaign URL's query name, the network's
    # placeholder for its value, and the click field it fills (sub_id_N, cost, external_id, ...).
    parameters = TextField(default="[]")
    postback_url = TextField(default="")  # Outbound postback template; '' sends none.
    postback_statuses = TextField(default="sale")  # Comma-separated conversion statuses.
    postback_method = TextField(default="GET")
    status = TextField(default="active")  # active, archived
    created_at = BigIntegerField(default=_now_ms)
    updated_at = BigIntegerField(default=_now_ms)

    class Meta:
        table_name = "traffic_source"
