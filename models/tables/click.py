"""The click row. Written by the spool flusher (models/clicks/spool.py) and by `lanner generate clicks`
(workers/bench/generate.py); read by reports and the CLI."""

from __future__ import annotations

from peewee import AutoField, BigIntegerField, FloatField, IntegerField, TextField

from models.choices import SUB_ID_SLOTS
from models.tables.base import BaseModel


class Click(BaseModel):
    id = AutoField()
    subid = TextField(unique=True)
    created_at = BigIntegerField()  # Unix milliseconds, UTC.
    campaign_id = IntegerField()
    stream_id = IntegerField(null=True)
    offer_id = IntegerField(null=True)
    ip = TextField()
    user_agent = TextField()
    ua_hash = BigIntegerField()  # CRC-32 of the UA, as PHP's crc32() gives it.
    # IP + UA hash as one integer (models.clicks.record.visitor_key); NULL on clicks 0005 has not backfilled.
    visitor_key = BigIntegerField(null=True)
    referrer = TextField(default="")
    source = TextField(default="")
    external_id = TextField(default="")
    cost = FloatField(default=0.0)
    is_unique_global = IntegerField(default=0)
    is_unique_campaign = IntegerField(default=0)
    is_unique_stream = IntegerField(default=0)
    is_bot = IntegerField(default=0)
    # What routing saw (reports group by them) and how it decided (`route`, see models/routing/router.py).
    country = TextField(default="")
    region = TextField(default="")
    city = TextField(default="")
    device_type = TextField(default="")
    os = TextField(default="")
    browser = TextField(default="")
    language = TextField(default="")
    keyword = TextField(default="")
    route = TextField(default="")
    # The lander step (models/tables/lander.py): the lander the click was sent to (NULL: straight to
    # the offer) and when its link to the offer was clicked (Unix ms; NULL: not yet, or no lander).
    lander_id = IntegerField(null=True)
    lp_clicked_at = BigIntegerField(null=True)
    domain = TextField(default="")  # The request's host, lowercased, without its port (migration 0016).


SUB_ID_COLUMNS = tuple(f"sub_id_{slot}" for slot in range(1, SUB_ID_SLOTS + 1))
for _column in SUB_ID_COLUMNS:
    Click._meta.add_field(_column, TextField(default=""))
