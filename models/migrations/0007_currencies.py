"""Currencies: stored exchange rates and each conversion's payout in the report currency
(models/reporting/currency.py).

Before this, every amount was summed as it came: a `currency=EUR` postback's payout was added to
USD ones. Now a conversion keeps its payout and currency as received and, in `report_payout`, the
payout in the report currency (NULL while its currency has no rate).

The report currency of the data stored so far is USD, the currency every default said; `lanner db
migrate` adopts LANNER_REPORT_CURRENCY instead while the database holds no data. Existing click
and conversion costs are taken as in the report currency (they were summed as such). Conversions
in USD keep their payout; those in another currency had been added unconverted: they get NULL
and their payout is taken out of the rollups' revenue, until a rate for their currency is set.
The UPDATE touches only the conversion table (far smaller than the click table).
"""

STATEMENTS = [
    # One row per (currency, time it applies from): what one unit of it is worth in the report currency.
    """
CREATE TABLE exchange_rate (
    currency TEXT NOT NULL,
    valid_from INTEGER NOT NULL,
    rate REAL NOT NULL,
    source TEXT NOT NULL DEFAULT 'manual',
    PRIMARY KEY (currency, valid_from)
) WITHOUT ROWID""",
    "ALTER TABLE conversion ADD COLUMN report_payout REAL",
    "UPDATE conversion SET report_payout = payout WHERE currency = 'USD'",
    # Small by construction: only conversions waiting for an exchange rate are in it.
    (
        "CREATE INDEX conversion_unconverted ON conversion (currency, click_created_at) "
        "WHERE report_payout IS NULL"
    ),
    "INSERT INTO meta (key, value) VALUES ('report_currency', 'USD')",
]

SQL_UNCONVERTED = """
SELECT cv.status, cv.payout, cv.cost, c.created_at, c.campaign_id, c.stream_id, c.offer_id, c.source,
    c.country, c.device_type, c.os, c.browser, c.language
FROM conversion AS cv JOIN click AS c ON c.id = cv.click_id WHERE cv.report_payout IS NULL
"""


def apply(db):
    from models.reporting.rollups import RollupDelta, conversion_metrics, present_tables

    for statement in STATEMENTS:
        db.execute_sql(statement)
    live = db.execute_sql("SELECT value = 'live' FROM meta WHERE key = 'rollup_conversions'").fetchone()
    if not (live and live[0]):
        return  # The deferred backfill adds conversions with their report payout.
    delta = RollupDelta(present_tables(db.connection()))  # Later migrations' cubes start from these.
    for status, payout, cost, *key in db.execute_sql(SQL_UNCONVERTED).fetchall():
        delta.add_conversion(tuple(key), conversion_metrics(status, payout, cost), -1)
        delta.add_conversion(tuple(key), conversion_metrics(status, 0.0, cost))
    delta.apply(db.connection())
