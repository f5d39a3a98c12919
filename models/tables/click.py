"""The click row. Written by the spool flusher (models/clicks/spool.py) and by `lanner generate clicks`
(workers/bench/generate.py); read by reports and the CLI. Also the order of its columns in a click
record (models/clicks/record.py) and in the store's statements over it."""

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

# What routing saw and decided (migration 0002); text columns, last in the record and the line.
ROUTING_COLUMNS = (
    "country",
    "region",
    "city",
    "device_type",
    "os",
    "browser",
    "language",
    "keyword",
    "route",
)

CLICK_COLUMNS: tuple[str, ...] = (
    "subid",
    "created_at",
    "campaign_id",
    "stream_id",
    "offer_id",
    "ip",
    "user_agent",
    "ua_hash",
    "referrer",
    "source",
    "external_id",
    "cost",
    "is_unique_global",
    "is_unique_campaign",
    "is_unique_stream",
    "is_bot",
    *SUB_ID_COLUMNS,
    *ROUTING_COLUMNS,
)
# What a journal line lands in the click table: the generated clicks' columns (workers/bench) and the
# lander step's (migrations 0015 and 0016), which a journal line carries and a row of CLICK_COLUMNS lacks.
JOURNAL_COLUMNS: tuple[str, ...] = (*CLICK_COLUMNS, "lander_id", "domain")
# Positions in a decoded record, used on the hot path without building dicts.
SUBID, CREATED_AT, CAMPAIGN_ID, STREAM_ID, OFFER_ID, IP, USER_AGENT, UA_HASH = range(8)
