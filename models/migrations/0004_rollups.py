"""Rollups: hourly and daily aggregates of clicks and conversions (models/reporting/rollups.py), and deferred
steps.

Two cubes: the detail one (`rollup_hour`, `rollup_day`) and the campaign one
(`rollup_campaign_hour`, `rollup_campaign_day`).

Light here: the tables are created empty and the clicks already stored are left to the deferred
step `rollup_backfill`, which the Huey consumer runs in short chunks (models/migrations/deferred.py). The
watermark says which clicks it covers: the flusher of this release adds every click it lands.
"""

from models.migrations import deferred
from models.reporting.rollups import backfill_conversions
from models.store.meta import MetaStore
from models.store.rollups import RollupStore
from models.store.rows import fetch_one

SQL_COUNT_CLICKS = "SELECT COUNT(*) FROM click WHERE id > ? AND id <= ?"

DIMENSIONS = """
    campaign_id INTEGER NOT NULL,
    stream_id INTEGER NOT NULL,
    offer_id INTEGER NOT NULL,
    source TEXT NOT NULL,
    country TEXT NOT NULL,
    device_type TEXT NOT NULL,
    os TEXT NOT NULL,
    browser TEXT NOT NULL,
    language TEXT NOT NULL,"""
CAMPAIGN_DIMENSIONS = """
    campaign_id INTEGER NOT NULL,
    stream_id INTEGER NOT NULL,
    offer_id INTEGER NOT NULL,"""
METRICS = """
    clicks INTEGER NOT NULL DEFAULT 0,
    unique_global INTEGER NOT NULL DEFAULT 0,
    unique_campaign INTEGER NOT NULL DEFAULT 0,
    unique_stream INTEGER NOT NULL DEFAULT 0,
    bots INTEGER NOT NULL DEFAULT 0,
    click_cost REAL NOT NULL DEFAULT 0,
    leads INTEGER NOT NULL DEFAULT 0,
    sales INTEGER NOT NULL DEFAULT 0,
    rejected INTEGER NOT NULL DEFAULT 0,
    trash INTEGER NOT NULL DEFAULT 0,
    rebills INTEGER NOT NULL DEFAULT 0,
    revenue REAL NOT NULL DEFAULT 0,
    revenue_pending REAL NOT NULL DEFAULT 0,
    conversion_cost REAL NOT NULL DEFAULT 0,"""
KEY = "PRIMARY KEY (period, campaign_id, stream_id, offer_id, source, country, device_type, os, browser, \
language)"

STATEMENTS = [
    *(
        f"CREATE TABLE {table} (\n    period INTEGER NOT NULL,{DIMENSIONS}{METRICS}\n    {KEY}\n)"
        " WITHOUT ROWID"
        for table in ("rollup_hour", "rollup_day")
    ),
    # The campaign cube: a few rows per hour, for the campaign list and its day/stream/offer views.
    *(
        f"CREATE TABLE {table} (\n    period INTEGER NOT NULL,{CAMPAIGN_DIMENSIONS}{METRICS}\n"
        "    PRIMARY KEY (period, campaign_id, stream_id, offer_id)\n) WITHOUT ROWID"
        for table in ("rollup_campaign_hour", "rollup_campaign_day")
    ),
    # Reports on one campaign over a range: the key starts with the period, so this one helps them.
    "CREATE INDEX rollup_hour_campaign_period ON rollup_hour (campaign_id, period)",
    "CREATE INDEX rollup_day_campaign_period ON rollup_day (campaign_id, period)",
    """
CREATE TABLE deferred_step (
    name TEXT NOT NULL PRIMARY KEY,
    state TEXT NOT NULL DEFAULT 'pending',
    position INTEGER NOT NULL DEFAULT 0,
    target INTEGER NOT NULL DEFAULT 0,
    done_units INTEGER NOT NULL DEFAULT 0,
    total_units INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    error TEXT NOT NULL DEFAULT ''
)""",
    # The clicks stored so far (id <= target) are the backfill's; later ones are the flusher's.
    """
INSERT INTO deferred_step (name, target, total_units, created_at)
SELECT 'rollup_backfill', COALESCE(MAX(id), 0), COUNT(*), CAST(strftime('%s', 'now') AS INTEGER) * 1000
FROM click
""",
    # Conversion changes update the rollups only once the backfill has added the stored ones.
    "INSERT INTO meta (key, value) VALUES ('rollup_conversions', 'backfill')",
]


def apply(db):
    for statement in STATEMENTS:
        db.execute_sql(statement)


def backfill_rollups(conn, step, now: int) -> tuple[int, int]:
    """One chunk of `rollup_backfill`: (new position, clicks added)."""
    meta = MetaStore(conn)
    if meta.get("rollup_conversions") != "live":
        # Stored conversions join the rollups in the same transaction that makes later changes
        # update them, so none is counted twice or missed.
        backfill_conversions(conn)
        meta.set("rollup_conversions", "live")
    end = min(step.position + deferred.CHUNK_IDS, step.target)
    store = RollupStore(conn)
    store.backfill_clicks(step.position, end, store.present_tables())
    counted = fetch_one(conn, SQL_COUNT_CLICKS, (step.position, end))
    assert counted is not None  # COUNT(*) has a row.
    return end, counted[0]


DEFERRED_STEPS = {deferred.ROLLUP_BACKFILL: backfill_rollups}
